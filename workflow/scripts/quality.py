from microg4m.formats import manifest as mf
from microg4m.stages import quality
from microg4m.common.smk import start

start(snakemake)
quality.run(
    mf.manifest_in(snakemake.input.clips),
    snakemake.input.scenes,
    snakemake.output[0],
    threads=snakemake.threads,
    **snakemake.params.settings,
)
