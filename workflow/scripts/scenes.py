from microg4m.formats import manifest as mf
from microg4m.stages import scenes
from microg4m.common.smk import start

start(snakemake)
scenes.run(mf.manifest_in(snakemake.input[0]), snakemake.output[0], **snakemake.params.settings)
