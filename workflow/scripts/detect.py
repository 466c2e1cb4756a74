from microg4m.stages import detect
from microg4m.formats.rejection import Rejection
from microg4m.engines.runtime import default_cache
from microg4m.common.smk import start

start(snakemake)
rules = snakemake.params.rejection
detect.run(
    snakemake.input.manifest,
    snakemake.output[0],
    threads=snakemake.threads,
    cache=default_cache(snakemake.params.models),  # $MICROG4M_EXPORT_CACHE, else <results>/models
    detector=snakemake.input.detector,
    rejection=Rejection.of(snakemake.input.scenes[0], **rules) if rules else None,
    frame_cache=snakemake.params.frame_cache,
    **snakemake.params.settings,
)
