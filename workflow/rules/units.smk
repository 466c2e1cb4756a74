localrules:
    units,


rule units:
    """The unit plan of the run, results/units.tsv (unit, source_id, frames), and no per-unit file
    or folder of another plan left (microg4m/stages/units.py); re-run when the plan changes.

    The first job of a run: download and demo_media wait for it (an ancient input: a new
    plan re-runs only the jobs of the units it changed). The plan is made when Snakemake
    builds its DAG, from the lengths known then; a run killed before the plan is written
    resumes from the same state (no video fetched or made yet) and makes the same plan;
    one killed later resumes from the written plan.
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
        frames=UNIT_FRAMES,
        per_unit=lambda wildcards: per_unit_paths(),
    script:
        "../scripts/units.py"
