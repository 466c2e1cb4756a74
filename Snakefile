# microg4m: sources -> download -> trim -> detect/scenes -> filter -> motion/track -> export
# Run: snakemake --cores all   (profile: workflow/profiles/default)


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/demo.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/trim.smk"
include: "workflow/rules/detect.smk"
include: "workflow/rules/filter.smk"
include: "workflow/rules/track.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/ledger.smk"


rule all:
    default_target: True
    input:
        rules.ledger.output,
        rules.export.output,
        expand(R("previews/{unit}.png"), unit=UNITS),
