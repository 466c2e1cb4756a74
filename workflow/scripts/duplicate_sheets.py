from microg4m.formats import manifest as mf
from microg4m.stages import duplicate_sheets
from microg4m.common.smk import start

start(snakemake)
duplicate_sheets.run(
    snakemake.input.pairs,
    [mf.manifest_in(d) for d in snakemake.input.clips],
    snakemake.output[0],
)
