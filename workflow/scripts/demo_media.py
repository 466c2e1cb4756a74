from microg4m import demo
from microg4m.smk import start

start(snakemake)
demo.make(snakemake.wildcards.name, snakemake.output[0])
