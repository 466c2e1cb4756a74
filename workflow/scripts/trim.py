from microg4m.formats import manifest as mf
from microg4m.stages import trim
from microg4m.common.smk import start

start(snakemake)
trim.run(
    snakemake.input[0],
    mf.manifest_in(snakemake.output[0]),
    mf.status_in(snakemake.output[0]),
    **snakemake.params.settings,
    check_free_space=bool(snakemake.resources.free_space_check),
)
