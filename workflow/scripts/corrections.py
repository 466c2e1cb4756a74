from microg4m import corrections
from microg4m.smk import start

start(snakemake)
corrections.run(
    snakemake.input.tracks,
    snakemake.input.manifest,
    snakemake.input.decisions,
    list(snakemake.input.files),
    snakemake.output.tracks,
    snakemake.output.report,
)
