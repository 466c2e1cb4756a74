rule frames:
    """JPEG frames of the kept clips of a source, for training."""
    input:
        manifest=R("clips/{unit}/manifest.tsv"),
        decisions=R("filter/{unit}.tsv"),
    output:
        R("frames/{unit}.tsv"),
    log:
        R("logs/frames/{unit}.log"),
    benchmark:
        R("benchmarks/frames/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        jpeg_quality=config["export"]["jpeg_quality"],
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/frames.py"
