localrules:
    versions,


rule versions:
    """The ffmpeg and package versions the jobs run with, for the report."""
    output:
        report(
            R("versions.tsv"),
            caption="../report/versions.rst",
            category="4. Software versions",
        ),
    log:
        R("logs/versions.log"),
    conda:
        "../envs/microg4m.yaml"
    params:
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/versions.py"
