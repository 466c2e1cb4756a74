from microg4m.stages import demo
from microg4m.common.smk import start

start(snakemake)
demo.make(snakemake.wildcards.name, snakemake.output[0])
