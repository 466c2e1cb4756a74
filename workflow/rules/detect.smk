rule detect:
    """YOLO person detection on every frame of every clip of a source, batched, cached."""
    input:
        R("clips/{src}/manifest.tsv"),
    output:
        R("detections/{src}.parquet"),
    params:
        settings=config["detect"],
    resources:
        gpu=1,
    threads: 2
    log:
        R("logs/detect/{src}.log"),
    benchmark:
        R("benchmarks/detect/{src}.tsv")
    script:
        "../scripts/detect.py"
