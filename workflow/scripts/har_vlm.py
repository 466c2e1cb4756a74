from microg4m.evaluate import vlm_har
from microg4m.common.smk import start
from microg4m.formats import manifest as mf

start(snakemake)
vlm_har.run(
    mf.manifest_in(snakemake.input.clips),
    snakemake.input.decisions,
    snakemake.input.tracks,
    snakemake.input.label_map,
    snakemake.output[0],
    **snakemake.params.settings,
)
