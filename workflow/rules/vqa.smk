rule vqa_draft:
    """Draft a caption and QA pairs for every kept clip of a unit with a vision-language model."""
    input:
        clips=R("clips/{unit}"),
        decisions=R("filter/{unit}.tsv"),
        downloads=R("download/{unit}.tsv"),
    output:
        report(
            R("vqa_drafts/{unit}.json"),
            caption="../report/vqa_drafts.rst",
            category="4. Captions and VQA",
            subcategory="Drafts",
        ),
    log:
        R("logs/vqa_draft/{unit}.log"),
    benchmark:
        R("benchmarks/vqa_draft/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        settings={k: v for k, v in config["vqa"]["draft"].items() if k != "enabled"},
    script:
        "../scripts/vqa_draft.py"


rule vqa_export:
    """vqa_and_captioning.json (released schema) and statistics for the reviewed clips."""
    input:
        clips=expand(R("clips/{unit}"), unit=UNITS),
        decisions=expand(R("filter/{unit}.tsv"), unit=UNITS),
        reviews=vqa_reviews_input,
    output:
        json=report(
            R("vqa/vqa_and_captioning.json"),
            caption="../report/vqa.rst",
            category="4. Captions and VQA",
            subcategory="Export",
        ),
        problems=report(
            R("vqa/vqa_report.tsv"),
            caption="../report/vqa.rst",
            category="4. Captions and VQA",
            subcategory="Export",
        ),
        stats=report(
            expand(R("vqa/statistics/{name}"), name=VQA_STAT_FILES),
            caption="../report/vqa_statistics.rst",
            category="4. Captions and VQA",
            subcategory="Statistics",
        ),
    log:
        R("logs/vqa_export.log"),
    benchmark:
        R("benchmarks/vqa_export.tsv")
    conda:
        "../envs/microg4m.yaml"
    script:
        "../scripts/vqa_export.py"
