rule signatures:
    """Perceptual hash sequence (frames and their mirrors) of every kept clip of a unit."""
    input:
        clips=R("clips/{unit}"),
        decisions=R("filter/{unit}.tsv"),
    output:
        R("signatures/{unit}.parquet"),
    log:
        R("logs/signatures/{unit}.log"),
    benchmark:
        R("benchmarks/signatures/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        settings=config["duplicates"]["signature"],
    script:
        "../scripts/signatures.py"
