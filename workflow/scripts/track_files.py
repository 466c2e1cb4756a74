from microg4m.stages import corrections, track_files as trackfiles
from microg4m.common.smk import start

start(snakemake)
corrections.run(
    snakemake.input.tracks,
    snakemake.input.manifest,
    snakemake.input.decisions,
    list(snakemake.input.corrections),
    snakemake.output.tracks,
    snakemake.output.report,
)
trackfiles.run(
    snakemake.input.manifest,
    snakemake.input.decisions,
    snakemake.output.tracks,
    snakemake.output.mot,
    snakemake.output.cvat,
)
