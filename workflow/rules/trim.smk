rule trim:
    """Cut one source into exact 3 s / 30 fps / 90-frame clips in one ffmpeg pass."""
    input:
        R("download/{unit}.tsv"),
    output:
        # the whole folder: its clips, manifest.tsv and status.tsv (Snakemake owns every
        # clip: a re-run starts from an empty folder, --delete-all-output removes it)
        directory(R("clips/{unit}")),
    log:
        R("logs/trim/{unit}.log"),
    benchmark:
        R("benchmarks/trim/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    resources:
        # the check of free space before the job writes (config check_free_space): a
        # resource, not a param, so that turning it off or on re-runs nothing
        free_space_check=FREE_SPACE_CHECK,
    params:
        settings=config["trim"],
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/trim.py"
