from microg4m.stages import track
from microg4m.common.smk import start

start(snakemake)
track.run(
    snakemake.input.manifest,
    snakemake.input.detections,
    snakemake.input.decisions,
    snakemake.input.motion,
    snakemake.output.tracks,
    contact_sheet=snakemake.output.sheet,
    previews_dir=snakemake.params.previews,
    **snakemake.params.settings,
)
