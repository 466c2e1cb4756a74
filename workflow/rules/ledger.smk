rule ledger:
    """Every source and clip with its status per stage and the reason (failed downloads with
    their reason class and advice); every source's provenance."""
    input:
        downloads=expand(R("download/{unit}.tsv"), unit=UNITS),
        clips=expand(R("clips/{unit}"), unit=UNITS),
        decisions=expand(R("filter/{unit}.tsv"), unit=UNITS),
        tracks=expand(R("corrected/{unit}.csv"), unit=UNITS),
        quality=expand(R("quality/{unit}.tsv"), unit=UNITS),
    output:
        ledger=report(
            R("ledger.tsv"), caption="../report/ledger.rst", category="1. Funnel"
        ),
        funnel=report(
            R("funnel.tsv"), caption="../report/funnel.rst", category="1. Funnel"
        ),
        plot=report(
            R("funnel.png"), caption="../report/funnel.rst", category="1. Funnel"
        ),
        provenance=report(
            R("provenance.tsv"),
            caption="../report/provenance.rst",
            category="1. Funnel",
        ),
    log:
        R("logs/ledger.log"),
    benchmark:
        R("benchmarks/ledger.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        # the sources table's order (the units need not follow it)
        order=list(SOURCES.index),
    script:
        "../scripts/ledger.py"
