from microg4m.stages import versions
from microg4m.formats import download_settings
from microg4m.common.smk import start

start(snakemake)
versions.run(snakemake.output[0], download=download_settings.read(snakemake.input.download))
