from microg4m.formats import manifest as mf
from microg4m.stages import track
from microg4m.common.smk import start

start(snakemake)
track.run(
    mf.manifest_in(snakemake.input.clips),
    snakemake.input.detections,
    snakemake.input.decisions,
    snakemake.input.motion,
    snakemake.output.tracks,
    contact_sheet=snakemake.output.sheet,
    previews_dir=getattr(snakemake.output, "previews", None),
    **snakemake.params.settings,
)
