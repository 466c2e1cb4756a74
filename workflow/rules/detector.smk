rule detector:
    """The model every detect job runs: exported once for the runtime (every frame shape),
    quantized on the first sources' clips for int8; its record names it."""
    input:
        calibration=calibration_manifests,
        # the exported models, kept across re-runs (rules/cache.smk)
        models=ancient(R("cache/models")),
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
        # what the model depends on (not conf, decoder, skip_rejected: detect's alone)
        settings={k: config["detect"][k] for k in DETECTOR_SETTINGS},
    script:
        "../scripts/detector.py"
