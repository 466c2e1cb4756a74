localrules:
    versions,


rule versions:
    """The ffmpeg and package versions the jobs run with, and the YouTube set-up with the
    download settings, for the report."""
    input:
        download=R("download/settings.json"),
        cookies=cookies_input,
    output:
        report(
            R("versions.tsv"),
            caption="../report/versions.rst",
            category="4. Software versions",
        ),
    log:
        R("logs/versions.log"),
    benchmark:
        R("benchmarks/versions.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        ffmpeg=config["ffmpeg"],
        # re-run when a package or the ffmpeg binary changes (read without running them)
        installed=_versions.installed(config["ffmpeg"]),
    script:
        "../scripts/versions.py"
