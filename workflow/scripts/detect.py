from microg4m.formats import manifest as mf
from microg4m.stages import detect
from microg4m.formats.rejection import Rejection
from microg4m.engines.runtime import default_cache
from microg4m.common.smk import start

start(snakemake)
rules = snakemake.params.rejection
quality = snakemake.input.quality  # empty unless a filter.* quality threshold is set
detect.run(
    mf.manifest_in(snakemake.input.clips),
    snakemake.output[0],
    threads=snakemake.threads,
    cache=default_cache(snakemake.input.models),  # $MICROG4M_EXPORT_CACHE, else <results>/cache/models
    detector=snakemake.input.detector,
    rejection=Rejection.of(snakemake.input.scenes[0], quality=quality[0] if quality else None, **rules)
    if rules
    else None,
    frame_cache=snakemake.input.frame_cache,
    **snakemake.params.settings,
)
