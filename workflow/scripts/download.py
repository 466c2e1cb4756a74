from microg4m.stages import download
from microg4m.common.smk import start

start(snakemake)
download.run(snakemake.params.sources, snakemake.output[0], **snakemake.params.settings)
