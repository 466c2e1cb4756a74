from microg4m import duplicate_sheets
from microg4m.smk import start

start(snakemake)
duplicate_sheets.run(
    snakemake.input.pairs, list(snakemake.input.manifests), snakemake.output[0]
)
