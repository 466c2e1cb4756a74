from microg4m import frames
from microg4m.smk import start

start(snakemake)
frames.run(
    snakemake.input.manifest,
    snakemake.input.decisions,
    snakemake.params.frames_dir,
    snakemake.output[0],
    jpeg_quality=snakemake.params.jpeg_quality,
)
