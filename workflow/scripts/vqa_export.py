from pathlib import Path

from microg4m import vqa_export
from microg4m.smk import start

start(snakemake)
vqa_export.run(
    manifests=list(snakemake.input.manifests),
    decisions=list(snakemake.input.decisions),
    reviews=snakemake.input.reviews[0] if snakemake.input.reviews else None,
    out_dir=Path(snakemake.output.json).parent,
)
