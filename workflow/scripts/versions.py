from microg4m.stages import versions
from microg4m.common.smk import start

start(snakemake)
versions.run(snakemake.output[0])
