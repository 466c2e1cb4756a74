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
    params:
        settings=config["scenes"],
    script:
        "../scripts/scenes.py"
