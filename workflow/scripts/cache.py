from microg4m.stages import cache
from microg4m.common.smk import start

start(snakemake)
cache.run(snakemake.output[0])
