from microg4m.stages import units
from microg4m.common.smk import start

start(snakemake)
units.run(snakemake.output[0], snakemake.params.plan, snakemake.params.per_unit, snakemake.params.work,
          snakemake.params.order)
