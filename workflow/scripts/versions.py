from microg4m import versions
from microg4m.smk import start

start(snakemake)
versions.run(snakemake.output[0])
