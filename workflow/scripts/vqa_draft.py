from microg4m.formats import manifest as mf
from microg4m.vqa import draft as vqa_draft
from microg4m.common.smk import start

start(snakemake)
vqa_draft.run(
    mf.manifest_in(snakemake.input.clips),
    snakemake.input.decisions,
    snakemake.output[0],
    downloads=snakemake.input.downloads,
    **snakemake.params.settings,
)
