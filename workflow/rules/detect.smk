rule detect:
    """YOLO person detection on every frame of every clip of a source, batched, cached."""
    input:
        clips=R("clips/{unit}"),
        detector=R("models/detector.json"),
        # detect.skip_rejected: the cuts, to skip the clips the filter rejects for them
        scenes=detect_scenes,
        # ... and the quality scores, to skip the clips a filter.* threshold on them rejects
        quality=detect_quality,
        # kept across re-runs (rules/cache.smk): exported models, and every frame YOLO ran on
        models=ancient(R("cache/models")),
        frame_cache=ancient(R("cache/detect")),
    output:
        R("detections/{unit}.parquet"),
    log:
        R("logs/detect/{unit}.log"),
    benchmark:
        R("benchmarks/detect/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    # Inference uses every thread the job gets (see detect_threads; change with
    # --set-threads detect=N); decoding runs beside it on one more thread.
    threads: detect_threads()
    resources:
        # Only a job that runs on a GPU takes the `gpu` resource (one per card, see the
        # profiles); on a CPU-only machine detect jobs do not wait for each other.
        gpu=1 if DETECT_ON_GPU else 0,
    params:
        # below FP32 also "exact": the frames near a decision threshold inferred again at FP32
        # (detect_settings; absent at FP32, so that the default's params are what they were)
        settings=detect_settings(),
        # detect.skip_rejected: the filter's rule (a filter edit re-runs detect, which then
        # runs YOLO only on frames it never ran on: results/cache/detect)
        rejection=rejection_params,
    script:
        "../scripts/detect.py"
