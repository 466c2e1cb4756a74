rule frames:
    """JPEG frames of the kept clips of a source, for training."""
    input:
        clips=R("clips/{unit}"),
        decisions=R("filter/{unit}.tsv"),
    output:
        done=R("frames/{unit}.tsv"),
        # the whole folder, <clip>/<clip>_%06d.jpg: a re-run (a clip no longer kept) starts
        # from an empty one; the export links the dataset's clips into export/frames/
        frames=directory(R("frames/{unit}")),
    log:
        R("logs/frames/{unit}.log"),
    benchmark:
        R("benchmarks/frames/{unit}.tsv")
    conda:
        "../envs/microg4m.yaml"
    resources:
        # the check of free space before the job writes (config check_free_space): a
        # resource, not a param, so that turning it off or on re-runs nothing
        free_space_check=FREE_SPACE_CHECK,
    params:
        jpeg_quality=config["export"]["jpeg_quality"],
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/frames.py"
