rule detector:
    """The model every detect job runs: exported once for the runtime (every frame shape),
    quantized on the first sources' clips for int8; its record names it."""
    input:
        calibration=calibration_manifests,
    output:
        R("models/detector.json"),
    log:
        R("logs/detector.log"),
    benchmark:
        R("benchmarks/detector.tsv")
    conda:
        "../envs/microg4m.yaml"
    resources:
        # a TensorRT engine is built on the GPU model that runs it
        gpu=1 if DETECT_ON_GPU else 0,
    params:
        settings=config["detect"],
        # the export cache: the folder of the record
        models=lambda w, output: os.path.dirname(output[0]),
    script:
        "../scripts/detector.py"
