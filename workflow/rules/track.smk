rule track:
    """Motion-adaptive BoT-SORT on the kept clips, from the detection cache."""
    input:
        clips=R("clips/{unit}"),
        detections=R("detections/{unit}.parquet"),
        decisions=R("filter/{unit}.tsv"),
        motion=R("motion/{unit}.tsv"),
    output:
        # track.previews: previews/{unit}/, one mp4 per kept clip (common.smk)
        **PREVIEW_OUTPUT,
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
        # only a ReID model on a GPU (track.device) uses one; BoT-SORT runs on the CPU
        gpu=1 if TRACK_ON_GPU else 0,
    params:
        settings={k: v for k, v in config["track"].items() if k != "previews"},
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/track.py"
