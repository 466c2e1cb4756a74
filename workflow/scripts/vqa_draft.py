from microg4m import vqa_draft
from microg4m.smk import start

start(snakemake)
vqa_draft.run(
    snakemake.input.manifest,
    snakemake.input.decisions,
    snakemake.output[0],
    downloads=snakemake.input.downloads,
    **snakemake.params.settings,
)
