from pathlib import Path

from microg4m.vqa import export as vqa_export
from microg4m.common.smk import start

start(snakemake)
vqa_export.run(
    manifests=list(snakemake.input.manifests),
    decisions=list(snakemake.input.decisions),
    reviews=snakemake.input.reviews[0] if snakemake.input.reviews else None,
    out_dir=Path(snakemake.output.json).parent,
)
