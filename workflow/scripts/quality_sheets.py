from microg4m.formats import manifest as mf
from microg4m.stages import quality_sheets
from microg4m.common.smk import start

start(snakemake)
quality_sheets.write(
    list(snakemake.input.quality),
    [mf.manifest_in(d) for d in snakemake.input.clips],
    snakemake.output[0],
    thresholds=snakemake.params.thresholds,
)
