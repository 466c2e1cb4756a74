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


rule quality_sheets:
    """Per quality score: its distribution over the run's clips and the clips at both ends."""
    input:
        quality=expand(R("quality/{unit}.tsv"), unit=UNITS),
        clips=expand(R("clips/{unit}"), unit=UNITS),
    output:
        report(
            directory(R("quality/sheets")),
            patterns=["{name}.png"],
            caption="../report/quality.rst",
            category="1. Funnel",
            subcategory="Quality scores",
        ),
    log:
        R("logs/quality_sheets.log"),
    benchmark:
        R("benchmarks/quality_sheets.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        # drawn on the histograms (an edit redraws the pages only)
        thresholds=quality_thresholds(),
    script:
        "../scripts/quality_sheets.py"
