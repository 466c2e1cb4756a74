from microg4m.stages import filter as clip_filter
from microg4m.common.smk import start

start(snakemake)
clip_filter.run(
    snakemake.input.manifest,
    snakemake.input.detections,
    snakemake.input.scenes,
    snakemake.output[0],
    screened=snakemake.params.screened,
    **snakemake.params.settings,
)
