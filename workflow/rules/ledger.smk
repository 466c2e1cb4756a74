rule ledger:
    """Every source and clip with its status per stage and the reason."""
    input:
        downloads=expand(R("download/{src}.json"), src=SOURCES.index),
        trims=expand(R("clips/{src}/status.json"), src=SOURCES.index),
        manifests=expand(R("clips/{src}/manifest.tsv"), src=SOURCES.index),
        decisions=expand(R("filter/{src}.tsv"), src=SOURCES.index),
        tracks=expand(R("tracks/{src}.csv"), src=SOURCES.index),
    output:
        R("ledger.tsv"),
        R("funnel.tsv"),
    log:
        R("logs/ledger.log"),
    script:
        "../scripts/ledger.py"
