"""One module per Snakemake rule, named after it (plus the CLI-only corrections and verify).

A stage imports formats, engines, report and common, never another stage."""
