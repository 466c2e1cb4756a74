from microg4m.evaluate import vlm_har
from microg4m.common.smk import start

start(snakemake)
vlm_har.run(
    snakemake.input.manifest,
    snakemake.input.decisions,
    snakemake.input.tracks,
    snakemake.input.label_map,
    snakemake.output[0],
    **snakemake.params.settings,
)
