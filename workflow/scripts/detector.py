from microg4m.stages import detector
from microg4m.engines.runtime import default_cache
from microg4m.common.smk import start

start(snakemake)
detector.run(
    snakemake.output[0],
    manifests=list(snakemake.input.calibration),
    cache=default_cache(snakemake.params.models),  # $MICROG4M_EXPORT_CACHE, else <results>/models
    **snakemake.params.settings,
)
