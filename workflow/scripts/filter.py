from microg4m.formats import manifest as mf
from microg4m.stages import filter as clip_filter
from microg4m.common.smk import start

start(snakemake)
clip_filter.run(
    mf.manifest_in(snakemake.input.clips),
    snakemake.input.detections,
    snakemake.input.scenes,
    snakemake.output[0],
    screened=snakemake.params.screened,
    quality=snakemake.input.quality[0] if snakemake.input.quality else None,
    **snakemake.params.settings,
)
