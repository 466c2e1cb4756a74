rule demo_media:
    """Make a demo source video from footage shipped inside Python packages."""
    output:
        "resources/demo/{name}.mp4",
    log:
        "resources/demo/logs/{name}.log",
    benchmark:
        "resources/demo/benchmarks/{name}.tsv"
    conda:
        "../envs/microg4m.yaml"
    params:
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/demo_media.py"
