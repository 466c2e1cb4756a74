from microg4m.formats import manifest as mf
from microg4m.stages import detector
from microg4m.engines.runtime import default_cache
from microg4m.common.smk import start

start(snakemake)
detector.run(
    snakemake.output[0],
    manifests=[mf.manifest_in(d) for d in snakemake.input.calibration],
    cache=default_cache(snakemake.input.models),  # $MICROG4M_EXPORT_CACHE, else <results>/cache/models
    **snakemake.params.settings,
)
