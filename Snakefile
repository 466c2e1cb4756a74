# microg4m: sources -> download -> trim -> detect/scenes -> filter -> motion/track -> export
# Run: snakemake --cores all   (profile: workflow/profiles/default)


configfile: "config/config.yaml"


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
    input:
        rules.ledger.output,
        rules.export.output,
        expand(R("previews/{src}.png"), src=SOURCES.index),
    default_target: True
