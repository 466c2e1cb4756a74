from microg4m.stages import ledger
from microg4m.common.smk import start

start(snakemake)
ledger.run(
    downloads=list(snakemake.input.downloads),
    trims=list(snakemake.input.trims),
    manifests=list(snakemake.input.manifests),
    decisions=list(snakemake.input.decisions),
    tracks=list(snakemake.input.tracks),
    ledger=snakemake.output.ledger,
    funnel=snakemake.output.funnel,
    funnel_plot=snakemake.output.plot,
    provenance=snakemake.output.provenance,
)
