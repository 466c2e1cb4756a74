from microg4m.formats import manifest as mf
from microg4m.stages import ledger
from microg4m.common.smk import start

start(snakemake)
ledger.run(
    downloads=list(snakemake.input.downloads),
    trims=[mf.status_in(d) for d in snakemake.input.clips],
    manifests=[mf.manifest_in(d) for d in snakemake.input.clips],
    decisions=list(snakemake.input.decisions),
    tracks=list(snakemake.input.tracks),
    ledger=snakemake.output.ledger,
    funnel=snakemake.output.funnel,
    funnel_plot=snakemake.output.plot,
    provenance=snakemake.output.provenance,
    order=snakemake.params.order,
    quality=list(snakemake.input.quality),
)
