rule trim:
    """Cut one source into exact 3 s / 30 fps / 90-frame clips in one ffmpeg pass."""
    input:
        R("download/{unit}.tsv"),
    output:
        manifest=R("clips/{unit}/manifest.tsv"),
        status=R("clips/{unit}/status.tsv"),
    log:
        R("logs/trim/{unit}.log"),
    benchmark:
        R("benchmarks/trim/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        settings=config["trim"],
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/trim.py"
