localrules:
    download,


rule download:
    """Fetch one source with yt-dlp (or link a local film); always writes a status record."""
    input:
        local_source_input,
    output:
        R("download/{src}.json"),
    params:
        url=lambda wc: SOURCES.loc[wc.src, "url"],
        clip_type=lambda wc: SOURCES.loc[wc.src, "clip_type"],
        settings=config["download"],
    log:
        R("logs/download/{src}.log"),
    script:
        "../scripts/download.py"
