rule frames:
    """JPEG frames of the kept clips of a source, for training."""
    input:
        manifest=R("clips/{unit}/manifest.tsv"),
        decisions=R("filter/{unit}.tsv"),
    output:
        R("frames/{unit}.tsv"),
    log:
        R("logs/frames/{unit}.log"),
    benchmark:
        R("benchmarks/frames/{unit}.tsv")
    conda:
        "../../envs/microg4m.yaml"
    params:
        jpeg_quality=config["export"]["jpeg_quality"],
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/frames.py"


rule export:
    """AVA CSVs, label map, annotation template, splits, frame lists and statistics; the
    sources' provenance (sources.csv, redownload.tsv) and the datasheet."""
    input:
        manifests=expand(R("clips/{unit}/manifest.tsv"), unit=UNITS),
        decisions=expand(R("filter/{unit}.tsv"), unit=UNITS),
        tracks=expand(R("corrected/{unit}.csv"), unit=UNITS),
        corrections=expand(R("corrected/{unit}.tsv"), unit=UNITS),
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
        "../../envs/microg4m.yaml"
    params:
        split=config["export"]["split"],
        correction_problems=CORRECTION_PROBLEMS,
    script:
        "../scripts/export.py"
