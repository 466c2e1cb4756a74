def actions_input(wildcards):
    path = Path(config["export"]["actions"])
    return [str(path)] if path.is_file() else []


rule frames:
    """JPEG frames of the kept clips of a source, for training."""
    input:
        manifest=R("clips/{src}/manifest.tsv"),
        decisions=R("filter/{src}.tsv"),
    output:
        R("frames/{src}.tsv"),
    params:
        frames_dir=R("frames"),
        jpeg_quality=config["export"]["jpeg_quality"],
    log:
        R("logs/frames/{src}.log"),
    script:
        "../scripts/frames.py"


rule export:
    """AVA CSVs, label map, annotation template, splits, frame lists and statistics."""
    input:
        manifests=expand(R("clips/{src}/manifest.tsv"), src=SOURCES.index),
        decisions=expand(R("filter/{src}.tsv"), src=SOURCES.index),
        tracks=expand(R("tracks/{src}.csv"), src=SOURCES.index),
        frames=(
            expand(R("frames/{src}.tsv"), src=SOURCES.index)
            if config["export"]["frames"]
            else []
        ),
        label_map=config["export"]["label_map"],
        actions=actions_input,
    output:
        directory(R("export")),
    params:
        split=config["export"]["split"],
    log:
        R("logs/export.log"),
    script:
        "../scripts/export.py"
