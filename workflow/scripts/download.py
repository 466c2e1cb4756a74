from microg4m import download
from microg4m.smk import start

start(snakemake)
download.run(snakemake.params.sources, snakemake.output[0], **snakemake.params.settings)
