rule motion:
    """Optical-flow motion score and level of every clip of a source."""
    input:
        R("clips/{src}/manifest.tsv"),
    output:
        R("motion/{src}.tsv"),
    params:
        settings=config["motion"],
    log:
        R("logs/motion/{src}.log"),
    benchmark:
        R("benchmarks/motion/{src}.tsv")
    script:
        "../scripts/motion.py"


rule track:
    """Motion-adaptive BoT-SORT on the kept clips, from the detection cache."""
    input:
        manifest=R("clips/{src}/manifest.tsv"),
        detections=R("detections/{src}.parquet"),
        decisions=R("filter/{src}.tsv"),
        motion=R("motion/{src}.tsv"),
    output:
        tracks=R("tracks/{src}.csv"),
        sheet=report(
            R("previews/{src}.png"),
            caption="../report/contact_sheet.rst",
            category="Contact sheets",
        ),
    params:
        settings={k: v for k, v in config["track"].items() if k != "previews"},
        previews=lambda wc: R(f"previews/{wc.src}") if config["track"]["previews"] else None,
    resources:
        gpu=1 if config["track"]["reid_weights"] else 0,
    log:
        R("logs/track/{src}.log"),
    benchmark:
        R("benchmarks/track/{src}.tsv")
    script:
        "../scripts/track.py"
