from microg4m.formats import manifest as mf
from microg4m.stages import signatures
from microg4m.common.smk import start

start(snakemake)
signatures.run(
    mf.manifest_in(snakemake.input.clips),
    snakemake.input.decisions,
    snakemake.output[0],
    **snakemake.params.settings,
)
