from microg4m.stages import motion
from microg4m.common.smk import start

start(snakemake)
motion.run(snakemake.input[0], snakemake.output[0], **snakemake.params.settings)
