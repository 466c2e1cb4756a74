localrules:
    cache,


rule cache:
    """A folder whose files outlive the jobs that keep them there (microg4m/stages/cache.py)."""
    output:
        directory(R("{folder}")),
    log:
        R("logs/cache/{folder}.log"),
    wildcard_constraints:
        folder="|".join(_cache.FOLDERS),
    conda:
        "../envs/microg4m.yaml"
    script:
        "../scripts/cache.py"
