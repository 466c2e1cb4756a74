rule filter:
    """Keep clips with enough person frames and no scene cut; every decision with its reason."""
    input:
        clips=R("clips/{unit}"),
        detections=R("detections/{unit}.parquet"),
        scenes=R("scenes/{unit}.tsv"),
        # the quality scores, only when a filter.* threshold on them is set
        quality=filter_quality,
    output:
        R("filter/{unit}.tsv"),
    log:
        R("logs/filter/{unit}.log"),
    benchmark:
        R("benchmarks/filter/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        settings=filter_settings(),
        screened=screened_clips,
    script:
        "../scripts/filter.py"
