from microg4m import detector
from microg4m.runtime import default_cache
from microg4m.smk import start

start(snakemake)
detector.run(
    snakemake.output[0],
    manifests=list(snakemake.input.calibration),
    cache=default_cache(snakemake.params.models),  # $MICROG4M_EXPORT_CACHE, else <results>/models
    **snakemake.params.settings,
)
