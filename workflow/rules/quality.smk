rule quality:
    """Scores of every clip of a unit: transitions, burnt-in text, camera motion, sharpness
    and exposure (the filter turns them into reasons only when a filter.* threshold is set).
    """
    input:
        clips=R("clips/{unit}"),
        scenes=R("scenes/{unit}.tsv"),
    output:
        R("quality/{unit}.tsv"),
    log:
        R("logs/quality/{unit}.log"),
    benchmark:
        R("benchmarks/quality/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        settings=config["quality"],
    script:
        "../scripts/quality.py"
