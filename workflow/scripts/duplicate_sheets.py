from microg4m.stages import duplicate_sheets
from microg4m.common.smk import start

start(snakemake)
duplicate_sheets.run(
    snakemake.input.pairs, list(snakemake.input.manifests), snakemake.output[0]
)
