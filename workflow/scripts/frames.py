from pathlib import Path

from microg4m.stages import frames
from microg4m.common.smk import start

start(snakemake)
frames.run(
    snakemake.input.manifest,
    snakemake.input.decisions,
    Path(snakemake.output[0]).parent,  # results/frames/<clip>/<clip>_%06d.jpg
    snakemake.output[0],
    jpeg_quality=snakemake.params.jpeg_quality,
)
