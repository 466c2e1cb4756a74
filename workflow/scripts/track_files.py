from microg4m.formats import manifest as mf
from microg4m.stages import corrections, track_files as trackfiles
from microg4m.common.smk import start

start(snakemake)
corrections.run(
    snakemake.input.tracks,
    mf.manifest_in(snakemake.input.clips),
    snakemake.input.decisions,
    list(snakemake.input.corrections),
    snakemake.output.tracks,
    snakemake.output.report,
)
trackfiles.run(
    mf.manifest_in(snakemake.input.clips),
    snakemake.input.decisions,
    snakemake.output.tracks,
    snakemake.output.mot,
    snakemake.output.cvat,
)
