from microg4m.stages import duplicates
from microg4m.common.smk import start

start(snakemake)
duplicates.run(
    list(snakemake.input.signatures),
    snakemake.output.pairs,
    cache_dir=snakemake.input.cache,
    references=list(snakemake.input.references),
    contamination=snakemake.output.contamination,
    step_s=snakemake.params.step_s,
    **snakemake.params.settings,
)
