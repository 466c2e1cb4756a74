rule scenes:
    """Transitions (cuts, and with TransNetV2 gradual ones) in every clip of a unit."""
    input:
        R("clips/{unit}"),
        # scenes.detector transnetv2 | both: TransNetV2's predictions kept across re-runs
        cache=scenes_cache,
    output:
        R("scenes/{unit}.tsv"),
    log:
        R("logs/scenes/{unit}.log"),
    benchmark:
        R("benchmarks/scenes/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    threads: scenes_threads()
    resources:
        # TransNetV2 runs where detect runs: on a GPU it takes the `gpu` resource as detect does
        gpu=1 if SCENES_ON_GPU else 0,
    params:
        # with TransNetV2 also detect.device (absent for PySceneDetect: the paper's params as they were)
        settings=scenes_settings(),
    script:
        "../scripts/scenes.py"
