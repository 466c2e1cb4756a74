from microg4m import motion
from microg4m.smk import start

start(snakemake)
motion.run(snakemake.input[0], snakemake.output[0], **snakemake.params.settings)
