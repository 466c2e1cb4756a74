rule scenes:
    """PySceneDetect cut frames of every clip of a source."""
    input:
        R("clips/{unit}"),
    output:
        R("scenes/{unit}.tsv"),
    log:
        R("logs/scenes/{unit}.log"),
    benchmark:
        R("benchmarks/scenes/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        settings=config["scenes"],
    script:
        "../scripts/scenes.py"
