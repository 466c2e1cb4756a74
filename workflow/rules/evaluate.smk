rule har_vlm:
    """Ask a vision-language model which actions each tracked person of a unit performs
    (the paper's VLM baseline, appendix G.5)."""
    input:
        clips=R("clips/{unit}"),
        decisions=R("filter/{unit}.tsv"),
        tracks=R("corrected/{unit}.csv"),
        label_map=config["export"]["label_map"],
    output:
        report(
            R("har_vlm/{unit}.json"),
            caption="../report/har_vlm.rst",
            category="5. Benchmark",
            subcategory="VLM answers",
        ),
    log:
        R("logs/har_vlm/{unit}.log"),
    benchmark:
        R("benchmarks/har_vlm/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        settings={
            k: v
            for k, v in config["evaluate"]["vlm"].items()
            if k not in ("enabled", "split")
        },
    script:
        "../scripts/har_vlm.py"


rule har_vlm_eval:
    """The VLM baseline's figures on a split of the export (Table 11: mAP, F1, recall, AUROC)."""
    input:
        answers=expand(R("har_vlm/{unit}.json"), unit=UNITS),
        export=R("export"),
    output:
        json=report(
            R("evaluate/har_vlm.json"),
            caption="../report/har_vlm_eval.rst",
            category="5. Benchmark",
            subcategory="VLM baseline",
        ),
        per_class=report(
            R("evaluate/har_vlm_ap_per_class.csv"),
            caption="../report/har_vlm_eval.rst",
            category="5. Benchmark",
            subcategory="VLM baseline",
        ),
    log:
        R("logs/har_vlm_eval.log"),
    conda:
        "../envs/microg4m.yaml"
    params:
        split=config["evaluate"]["vlm"]["split"],
    script:
        "../scripts/har_vlm_eval.py"
