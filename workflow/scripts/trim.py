from microg4m import trim
from microg4m.smk import start

start(snakemake)
trim.run(
    snakemake.input[0],
    snakemake.output.manifest,
    snakemake.output.status,
    **snakemake.params.settings,
)
