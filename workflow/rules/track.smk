rule track:
    """Motion-adaptive BoT-SORT on the kept clips, from the detection cache."""
    input:
        manifest=R("clips/{unit}/manifest.tsv"),
        detections=R("detections/{unit}.parquet"),
        decisions=R("filter/{unit}.tsv"),
        motion=R("motion/{unit}.tsv"),
    output:
        tracks=R("tracks/{unit}.csv"),
        sheet=report(
            R("previews/{unit}.png"),
            caption="../report/contact_sheet.rst",
            category="2. Contact sheets",
        ),
    log:
        R("logs/track/{unit}.log"),
    benchmark:
        R("benchmarks/track/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    resources:
        gpu=1 if config["track"]["reid_weights"] else 0,
    params:
        settings={k: v for k, v in config["track"].items() if k != "previews"},
        previews=lambda wc: (
            R(f"previews/{wc.unit}") if config["track"]["previews"] else None
        ),
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/track.py"
