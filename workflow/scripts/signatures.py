from microg4m.stages import signatures
from microg4m.common.smk import start

start(snakemake)
signatures.run(
    snakemake.input.manifest,
    snakemake.input.decisions,
    snakemake.output[0],
    **snakemake.params.settings,
)
