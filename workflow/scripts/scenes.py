from microg4m.formats import manifest as mf
from microg4m.stages import scenes
from microg4m.common.smk import start

start(snakemake)
cache = snakemake.input.cache  # empty unless scenes.detector runs TransNetV2
scenes.run(mf.manifest_in(snakemake.input[0]), snakemake.output[0], cache=cache[0] if cache else None,
           threads=snakemake.threads, **snakemake.params.settings)
