from microg4m import detect
from microg4m.smk import start

start(snakemake)
detect.run(
    snakemake.input[0],
    snakemake.output[0],
    threads=snakemake.threads,
    cache=snakemake.params.models,
    **snakemake.params.settings,
)
