rule motion:
    """Optical-flow motion score and level of every clip of a source."""
    input:
        R("clips/{unit}"),
    output:
        R("motion/{unit}.tsv"),
    log:
        R("logs/motion/{unit}.log"),
    benchmark:
        R("benchmarks/motion/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        settings=config["motion"],
    script:
        "../scripts/motion.py"
