from microg4m.evaluate import vlm_har
from microg4m.common.smk import start

start(snakemake)
vlm_har.score_split(
    snakemake.input.answers,
    snakemake.input.export,
    snakemake.params.split,
    snakemake.output.json,
    snakemake.output.per_class,
)
