localrules:
    units,


rule units:
    """The unit plan of the run, results/units.tsv (unit, source_id), and no per-unit file
    or folder of another plan left (microg4m/stages/units.py); re-run when the plan changes.
    """
    output:
        R("units.tsv"),
    log:
        R("logs/units.log"),
    benchmark:
        R("benchmarks/units.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        plan=UNITS,
        work=PLANNED.recorded,
        order=list(SOURCES.index),
        per_unit=lambda wildcards: per_unit_paths(),
    script:
        "../scripts/units.py"
