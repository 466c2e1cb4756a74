from microg4m.formats import manifest as mf
from microg4m.stages import frames
from microg4m.common.smk import start

start(snakemake)
frames.run(
    mf.manifest_in(snakemake.input.clips),
    snakemake.input.decisions,
    snakemake.output.frames,  # results/frames/<unit>/<clip>/<clip>_%06d.jpg
    snakemake.output.done,
    jpeg_quality=snakemake.params.jpeg_quality,
    check_free_space=bool(snakemake.resources.free_space_check),
)
