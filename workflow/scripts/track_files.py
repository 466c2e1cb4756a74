from microg4m import corrections, trackfiles
from microg4m.smk import start

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
