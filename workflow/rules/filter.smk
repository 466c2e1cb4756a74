def screening_input(wildcards):
    path = Path(config["filter"]["screening"])
    return [str(path)] if path.is_file() else []


rule scenes:
    """PySceneDetect cut frames of every clip of a source."""
    input:
        R("clips/{src}/manifest.tsv"),
    output:
        R("scenes/{src}.tsv"),
    params:
        settings=config["scenes"],
    log:
        R("logs/scenes/{src}.log"),
    benchmark:
        R("benchmarks/scenes/{src}.tsv")
    script:
        "../scripts/scenes.py"


rule filter:
    """Keep clips with enough person frames and no scene cut; every decision with its reason."""
    input:
        manifest=R("clips/{src}/manifest.tsv"),
        detections=R("detections/{src}.parquet"),
        scenes=R("scenes/{src}.tsv"),
        screening=screening_input,
    output:
        R("filter/{src}.tsv"),
    params:
        settings={k: v for k, v in config["filter"].items() if k != "screening"},
    log:
        R("logs/filter/{src}.log"),
    script:
        "../scripts/filter.py"
