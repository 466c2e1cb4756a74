from microg4m import trackfiles
from microg4m.smk import start

start(snakemake)
trackfiles.run(
    snakemake.input.manifest,
    snakemake.input.decisions,
    snakemake.input.tracks,
    snakemake.output.mot,
    snakemake.output.cvat,
)
