rule detect:
    """YOLO person detection on every frame of every clip of a source, batched, cached."""
    input:
        R("clips/{unit}/manifest.tsv"),
    output:
        R("detections/{unit}.parquet"),
    log:
        R("logs/detect/{unit}.log"),
    benchmark:
        R("benchmarks/detect/{unit}.tsv")
    conda:
        "../../envs/microg4m.yaml"
    threads: 2
    resources:
        gpu=1,
    params:
        settings=config["detect"],
    script:
        "../scripts/detect.py"
