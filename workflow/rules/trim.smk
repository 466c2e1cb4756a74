rule trim:
    """Cut one source into exact 3 s / 30 fps / 90-frame clips in one ffmpeg pass."""
    input:
        R("download/{src}.json"),
    output:
        manifest=R("clips/{src}/manifest.tsv"),
        status=R("clips/{src}/status.json"),
    params:
        settings=config["trim"],
    log:
        R("logs/trim/{src}.log"),
    benchmark:
        R("benchmarks/trim/{src}.tsv")
    script:
        "../scripts/trim.py"
