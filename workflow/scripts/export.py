from microg4m.formats import manifest as mf
from microg4m.stages import corrections, export
from microg4m.common.smk import start

start(snakemake)
export.run(
    manifests=[mf.manifest_in(d) for d in snakemake.input.clips],
    decisions=list(snakemake.input.decisions),
    tracks=list(snakemake.input.tracks),
    out_dir=snakemake.output[0],
    actions=snakemake.input.actions[0] if snakemake.input.actions else None,
    label_map=snakemake.input.label_map,
    frames=list(snakemake.input.frames),
    notes=corrections.not_used(snakemake.params.correction_problems, snakemake.input.corrections),
    downloads=list(snakemake.input.downloads),
    quality=list(snakemake.input.quality),
    duplicate_pairs=snakemake.input.duplicates[0] if snakemake.input.duplicates else None,
    contamination=(
        snakemake.input.contamination[0] if snakemake.input.contamination else None
    ),
    **snakemake.params.split,
)
