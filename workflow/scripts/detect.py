from microg4m import detect
from microg4m.runtime import default_cache
from microg4m.smk import start

start(snakemake)
detect.run(
    snakemake.input[0],
    snakemake.output[0],
    threads=snakemake.threads,
    cache=default_cache(snakemake.params.models),  # $MICROG4M_EXPORT_CACHE, else <results>/models
    **snakemake.params.settings,
)
