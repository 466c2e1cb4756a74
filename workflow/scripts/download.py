from microg4m.stages import download
from microg4m.formats import download_settings
from microg4m.common.smk import start

start(snakemake)
download.run(
    snakemake.params.sources,
    snakemake.output[0],
    video_dir=snakemake.input.videos,
    **snakemake.params.fetched,
    **download_settings.read(snakemake.input.transport),
    check_free_space=bool(snakemake.resources.free_space_check),
)
