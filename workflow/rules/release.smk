rule release:
    """The dataset release: a Hugging Face dataset repository (card, Parquet tables, the clips
    or their ids and URLs, WebDataset shards), croissant.json with the RAI fields, withdrawals
    without moving any other clip's split, CHANGES.md (docs/release.md)."""
    input:
        export=R("export"),
        clips=expand(R("clips/{unit}"), unit=UNITS),
        decisions=expand(R("filter/{unit}.tsv"), unit=UNITS),
        tracks=expand(R("corrected/{unit}.csv"), unit=UNITS),
        corrections=expand(R("corrected/{unit}.tsv"), unit=UNITS),
        funnel=rules.ledger.output.funnel,
        provenance=rules.ledger.output.provenance,
        detector=R("models/detector.json"),
        versions=R("versions.tsv"),
        vqa=VQA_EXPORT,
        duplicates=DUPLICATE_PAIRS,
        withdrawn=release_file("withdrawn"),
        licences=release_file("licences"),
        metadata=release_file("metadata"),
        team=team_summary,
        previous=previous_release,
    output:
        report(
            directory(R("release")),
            patterns=["{name}.md"],
            caption="../report/release.rst",
            category="6. Release",
        ),
    log:
        R("logs/release.log"),
    benchmark:
        R("benchmarks/release.tsv")
    conda:
        "../envs/microg4m.yaml"
    params:
        # the results folder: the one that holds the release
        results=lambda w, output: os.path.dirname(output[0]),
        previous=RELEASE["previous"],
        settings=_release.stage_settings(RELEASE),
        split=config["export"]["split"],
        # what made the clips and boxes, for the card and Croissant
        pipeline=_release.pipeline(config),
        encode=_release.encode(config),
        ffmpeg=config["ffmpeg"],
    script:
        "../scripts/release.py"
