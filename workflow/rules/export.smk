rule export:
    """AVA CSVs, label map, annotation template, splits, frame lists and statistics; the
    sources' provenance (sources.csv, redownload.tsv) and the datasheet."""
    input:
        clips=expand(R("clips/{unit}"), unit=UNITS),
        decisions=expand(R("filter/{unit}.tsv"), unit=UNITS),
        tracks=expand(R("corrected/{unit}.csv"), unit=UNITS),
        corrections=expand(R("corrected/{unit}.tsv"), unit=UNITS),
        quality=expand(R("quality/{unit}.tsv"), unit=UNITS),
        frames=(
            expand(R("frames/{unit}.tsv"), unit=UNITS)
            if config["export"]["frames"]
            else []
        ),
        label_map=config["export"]["label_map"],
        actions=actions_input,
        downloads=expand(R("download/{unit}.tsv"), unit=UNITS),
        duplicates=DUPLICATE_PAIRS,
        contamination=DUPLICATE_CONTAMINATION,
    output:
        report(
            directory(R("export")),
            patterns=["statistics/{name}.png", "{name}.tsv", "{name}.md"],
            caption="../report/statistics.rst",
            category="3. Statistics",
        ),
    log:
        R("logs/export.log"),
    benchmark:
        R("benchmarks/export.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        split=config["export"]["split"],
        correction_problems=CORRECTION_PROBLEMS,
    script:
        "../scripts/export.py"
