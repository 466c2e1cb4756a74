localrules:
    download,


rule download:
    """Fetch the sources of a unit with yt-dlp (or link local films); failures are rows too."""
    input:
        local_source_input,
    output:
        R("download/{unit}.tsv"),
    log:
        R("logs/download/{unit}.log"),
    benchmark:
        R("benchmarks/download/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        sources=unit_sources,
        settings=config["download"],
    script:
        "../scripts/download.py"
