from microg4m.stages import trim
from microg4m.common.smk import start

start(snakemake)
trim.run(
    snakemake.input[0],
    snakemake.output.manifest,
    snakemake.output.status,
    **snakemake.params.settings,
)
