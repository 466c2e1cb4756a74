localrules:
    download,
    download_settings,


rule download:
    """Fetch the sources of a unit with yt-dlp (or link local films); failures are rows too."""
    input:
        local=local_source_input,
        # how to fetch (cookies, sleeps, proxy, retries ...): read, but never a reason to
        # fetch again (ancient: its modification time does not count)
        transport=ancient(R("download/settings.json")),
        # the videos and their records, kept across re-runs (rules/cache.smk)
        videos=ancient(R("download/videos")),
    output:
        R("download/{unit}.tsv"),
    log:
        R("logs/download/{unit}.log"),
    benchmark:
        R("benchmarks/download/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    resources:
        # the check of free space before the job writes (config check_free_space): a
        # resource, not a param, so that turning it off or on re-runs nothing
        free_space_check=FREE_SPACE_CHECK,
    params:
        sources=unit_sources,
        # what is fetched: the url and clip type (sources) and the format
        fetched=_download_settings.fetched(config["download"]),
    script:
        "../scripts/download.py"


rule download_settings:
    """The download settings that change how sources are fetched, not what (microg4m/formats/download_settings.py)."""
    output:
        R("download/settings.json"),
    log:
        R("logs/download_settings.log"),
    conda:
        "../envs/microg4m.yaml"
    params:
        transport=_download_settings.transport(config["download"]),
    script:
        "../scripts/download_settings.py"
