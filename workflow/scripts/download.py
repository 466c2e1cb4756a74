from microg4m import download
from microg4m.smk import start

start(snakemake)
download.run(
    snakemake.wildcards.src,
    snakemake.params.url,
    snakemake.params.clip_type,
    snakemake.output[0],
    **snakemake.params.settings,
)
