rule corrections:
    """CVAT corrections of a unit's clips replace their tracks (a copy when there are none)."""
    input:
        tracks=R("tracks/{unit}.csv"),
        manifest=R("clips/{unit}/manifest.tsv"),
        decisions=R("filter/{unit}.tsv"),
        files=correction_files,
    output:
        tracks=R("corrected/{unit}.csv"),
        report=R("corrected/{unit}.tsv"),
    log:
        R("logs/corrections/{unit}.log"),
    conda:
        "../../envs/microg4m.yaml"
    script:
        "../scripts/corrections.py"


rule track_files:
    """MOTChallenge text and CVAT for video 1.1 XML per kept clip, from the final tracks."""
    input:
        manifest=R("clips/{unit}/manifest.tsv"),
        decisions=R("filter/{unit}.tsv"),
        tracks=R("corrected/{unit}.csv"),
    output:
        mot=directory(R("mot/{unit}")),
        cvat=directory(R("cvat/{unit}")),
    log:
        R("logs/track_files/{unit}.log"),
    conda:
        "../../envs/microg4m.yaml"
    script:
        "../scripts/track_files.py"
