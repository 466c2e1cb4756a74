from microg4m import filter as clip_filter
from microg4m.smk import start

start(snakemake)
clip_filter.run(
    snakemake.input.manifest,
    snakemake.input.detections,
    snakemake.input.scenes,
    snakemake.output[0],
    screening=snakemake.input.screening[0] if snakemake.input.screening else None,
    **snakemake.params.settings,
)
