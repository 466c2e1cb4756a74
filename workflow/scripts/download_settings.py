from microg4m.stages import download_settings
from microg4m.common.smk import start

start(snakemake)
download_settings.run(snakemake.output[0], **snakemake.params.transport)
