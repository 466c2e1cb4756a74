from microg4m.formats import manifest as mf
from pathlib import Path

from microg4m.vqa import export as vqa_export
from microg4m.common.smk import start

start(snakemake)
vqa_export.run(
    manifests=[mf.manifest_in(d) for d in snakemake.input.clips],
    decisions=list(snakemake.input.decisions),
    reviews=snakemake.input.reviews[0] if snakemake.input.reviews else None,
    out_dir=Path(snakemake.output.json).parent,
)
