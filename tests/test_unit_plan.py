"""results/units.tsv: the unit plan's writer and its one reader."""

from __future__ import annotations

import pytest

from microg4m.formats.unit_plan import read_plan, write_plan


def test_the_plan_reads_back_in_its_order(tmp_path):
    plan = {"batch00001": ["talk", "talk_2"], "batch00000": ["dancer"]}
    write_plan(tmp_path / "units.tsv", plan)
    back = read_plan(tmp_path / "units.tsv")
    assert back == plan and list(back) == list(plan)


def test_a_source_in_two_units_is_refused_naming_it(tmp_path):
    (tmp_path / "units.tsv").write_text("unit\tsource_id\nbatch00000\ta\nbatch00001\ta\n")
    with pytest.raises(ValueError, match=r"units.tsv: source\(s\) in more than one unit: a"):
        read_plan(tmp_path / "units.tsv")


def test_a_file_without_the_columns_is_refused(tmp_path):
    (tmp_path / "units.tsv").write_text("clip_id\tkeep\nx\t1\n")
    with pytest.raises(ValueError, match="not a unit plan"):
        read_plan(tmp_path / "units.tsv")


def test_the_frames_a_source_was_planned_with_read_back_and_an_older_plan_has_none(tmp_path):
    from microg4m.formats.unit_plan import read_frames

    write_plan(tmp_path / "units.tsv", {"batch00000": ["a", "b"]}, {"a": 270, "b": None})
    assert read_frames(tmp_path / "units.tsv") == {"a": 270, "b": None}
    (tmp_path / "old.tsv").write_text("unit\tsource_id\nbatch00000\ta\n")  # before the frames column
    assert read_plan(tmp_path / "old.tsv") == {"batch00000": ["a"]} and read_frames(tmp_path / "old.tsv") == {"a": None}
    (tmp_path / "bad.tsv").write_text("unit\tsource_id\tframes\nbatch00000\ta\t2.5\n")
    with pytest.raises(ValueError, match=r"bad.tsv: frames not a whole number for source\(s\) a"):
        read_plan(tmp_path / "bad.tsv")


def test_a_plan_that_cannot_be_read_is_reported_and_planned_anew(tmp_path, caplog):
    import pandas as pd

    from microg4m.formats.unit_plan import for_run

    sources = pd.DataFrame({"url": [f"http://127.0.0.1:9/{s}.mp4" for s in "abc"]}, index=list("abc"))
    (tmp_path / "units.tsv").write_text("clip_id\tkeep\nx\t1\n")
    units, frames, estimate = for_run(sources, "auto", 2, tmp_path)
    assert units == {"batch00000": ["a", "b"], "batch00001": ["c"]} and frames == dict.fromkeys("abc")
    assert "units.tsv cannot be read (" in caplog.text and "planned anew" in caplog.text


def test_download_records_count_on_a_workstation_and_never_on_a_cluster(tmp_path):
    """A download's record gives its source's length (workstation); on a cluster the
    compute node must plan what the submitting Snakemake planned before the download, so
    records are not read there (for_run(downloads=False))."""
    import json

    import pandas as pd

    from microg4m.formats.records import record_file
    from microg4m.formats.unit_plan import for_run

    sources = pd.DataFrame({"url": [f"http://127.0.0.1:9/{s}.mp4" for s in "abcd"]}, index=list("abcd"))
    before = for_run(sources, "auto", 2, tmp_path, downloads=False)
    videos = tmp_path / "download" / "videos"
    videos.mkdir(parents=True)
    record_file(videos, "a").write_text(json.dumps({"format": "f", "record": {"status": "ok", "duration": 61.5}}))
    assert for_run(sources, "auto", 2, tmp_path, downloads=False) == before
    units, frames, estimate = for_run(sources, "auto", 2, tmp_path)
    assert frames["a"] == 20 * 90 and estimate == {"a": 1800, "b": 1800, "c": 1800, "d": 1800}
    write_plan(tmp_path / "units.tsv", {"batch00000": ["a", "b"], "batch00001": ["c"]}, {"a": None})
    # a planned source keeps the frames it was planned with in the file, and counts with its record
    units, frames, estimate = for_run(sources, "auto", 2, tmp_path)
    assert frames == {"a": None, "b": None, "c": None, "d": None} and estimate["a"] == 1800
    assert units == {"batch00000": ["a", "b"], "batch00001": ["c", "d"]}  # d joins the lighter unit
