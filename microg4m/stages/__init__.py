"""One module per Snakemake rule, named after it, plus corrections (applied inside the
track_files job) and verify (command line only).

A stage imports formats, engines, report and common, never another stage. The splits
are formats/splits.py: the export rule writes them, and the report and the datasheet
read them too."""
