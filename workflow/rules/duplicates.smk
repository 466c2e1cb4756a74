rule duplicates:
    """Near-duplicate clip pairs across sources (incremental: new or changed units only)."""
    input:
        signatures=expand(R("signatures/{unit}.parquet"), unit=UNITS),
        references=config["duplicates"]["reference"],
        # kept across re-runs (rules/cache.smk): only new or changed units are compared
        cache=ancient(R("cache/duplicates")),
    output:
        pairs=R("duplicates/pairs.tsv"),
        contamination=R("duplicates/contamination.tsv"),
    log:
        R("logs/duplicates.log"),
    benchmark:
        R("benchmarks/duplicates.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        settings=config["duplicates"]["match"],
        step_s=config["duplicates"]["signature"]["step_s"],
    script:
        "../scripts/duplicates.py"


rule duplicate_sheets:
    """Each near-duplicate pair side by side, for the report."""
    input:
        pairs=R("duplicates/pairs.tsv"),
        clips=expand(R("clips/{unit}"), unit=UNITS),
    output:
        report(
            directory(R("duplicates/sheets")),
            patterns=["{page}.png"],
            caption="../report/duplicates.rst",
            category="5. Near-duplicates",
        ),
    log:
        R("logs/duplicate_sheets.log"),
    benchmark:
        R("benchmarks/duplicate_sheets.tsv")
    conda:
        "../envs/microg4m.yaml"
    script:
        "../scripts/duplicate_sheets.py"
