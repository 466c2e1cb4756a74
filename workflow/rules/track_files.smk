rule track_files:
    """Final tracks of a unit (its CVAT corrections applied; a copy when there are none),
    and MOTChallenge text and CVAT for video 1.1 XML per kept clip."""
    input:
        tracks=R("tracks/{unit}.csv"),
        clips=R("clips/{unit}"),
        decisions=R("filter/{unit}.tsv"),
        corrections=correction_files,
    output:
        tracks=R("corrected/{unit}.csv"),
        report=R("corrected/{unit}.tsv"),
        mot=directory(R("mot/{unit}")),
        cvat=directory(R("cvat/{unit}")),
    log:
        R("logs/track_files/{unit}.log"),
    benchmark:
        R("benchmarks/track_files/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    script:
        "../scripts/track_files.py"
