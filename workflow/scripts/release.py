from microg4m.common.smk import start
from microg4m.stages import release


def first(files):
    return files[0] if files else None


start(snakemake)
inp = snakemake.input
release.run(
    results=snakemake.params.results,
    out_dir=snakemake.output[0],
    export_dir=inp.export,
    vqa=first(inp.vqa),
    previous=snakemake.params.previous,
    withdrawn=first(inp.withdrawn),
    licences=first(inp.licences),
    metadata=first(inp.metadata),
    team_summary=first(inp.team),
    duplicate_pairs=first(inp.duplicates),
    funnel=inp.funnel,
    provenance_table=inp.provenance,
    detector=inp.detector,
    versions=inp.versions,
    split=snakemake.params.split,
    pipeline=snakemake.params.pipeline,
    encode=snakemake.params.encode,
    **snakemake.params.settings,
)
