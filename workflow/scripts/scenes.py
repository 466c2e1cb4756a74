from microg4m import scenes
from microg4m.smk import start

start(snakemake)
scenes.run(snakemake.input[0], snakemake.output[0], **snakemake.params.settings)
