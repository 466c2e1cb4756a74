"""Near-duplicates through Snakemake: a mirrored, cropped re-upload of the demo dancer is
found, its source shares the dancer's split, the report shows the pair, and a new source
re-runs only its own stages and compares only its clips."""

from __future__ import annotations

import base64
import re

import pandas as pd
import pytest

from conftest import ffmpeg, get_footage
from microg4m.formats.results_index import ResultsIndex
from workflow import dry_run_jobs, jobs_ran, make_workdir, set_config, snakemake

pytestmark = pytest.mark.slow

SOURCES = ("source_id\turl\tclip_type\n"
           "dancer\tresources/demo/dancer.mp4\tr\n"
           "pianist\tresources/demo/pianist.mp4\tr\n"
           "dancercopy\tuploads/dancercopy.mp4\tr\n")
PER_UNIT = ["download", "trim", "detect", "scenes", "quality", "filter", "motion", "track", "frames",
            "track_files", "signatures"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    wd = make_workdir(tmp_path_factory.mktemp("dups_wf") / "wd", sources=SOURCES,
                      config={"download": {"retries": 1}, "detect": {"imgsz": 320}})
    # no labels: every kept clip is in the splits
    set_config(wd, "export", actions="annotations/no_labels.csv",
               split={"seed": 42, "ratios": [0.7, 0.1, 0.2], "group_by": "source", "duplicates": "group"})
    # the demo dancer's footage, mirrored, cropped by 10 % and re-encoded at low quality
    (wd / "uploads").mkdir()
    ffmpeg("-i", str(get_footage("dancer")), "-t", "9.5", "-an", "-vf", "hflip,crop=trunc(iw*0.9/2)*2:trunc(ih*0.9/2)*2",
           "-c:v", "libx264", "-preset", "veryfast", "-crf", "35", "-pix_fmt", "yuv420p", str(wd / "uploads" / "dancercopy.mp4"))
    proc = snakemake(wd)
    counts = jobs_ran(proc)
    # sources_per_job auto: 2 units on 2 CPUs, packed by frames; only the upload is known
    # while the DAG is built (the demo videos are made by the run), the others count as it
    units = ResultsIndex(wd / "results").units()
    assert list(units.values()) == [["dancer", "dancercopy"], ["pianist"]]
    assert counts["signatures"] == len(units) and counts["duplicates"] == 1 and counts["duplicate_sheets"] == 1
    return wd


def read_tsv(path):
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


def kept_of(run_dir, source_id: str) -> list[str]:
    """The kept clips of a source (its unit's files, found through the results index)."""
    return [c.clip_id for c in ResultsIndex(run_dir / "results").clips().values()
            if c.source_id == source_id and c.kept]


def test_the_reupload_is_found_and_shares_the_split(run_dir):
    export = run_dir / "results" / "export"
    pairs = read_tsv(export / "duplicates.tsv")
    assert set(zip(pairs.source_a, pairs.source_b)) == {("dancer", "dancercopy")}
    kept = kept_of(run_dir, "dancercopy")
    assert len(kept) >= 2 and set(kept) <= set(pairs.clip_b)
    assert (pairs.mirrored == "True").all() and (pairs.decision == "same split").all()
    same_seq = pairs[pairs.clip_a.str.replace("dancer_", "") == pairs.clip_b.str.replace("dancercopy_", "")]
    assert len(same_seq) == len(kept)  # each copied clip with its original (the studio also looks alike at other times)
    by_source = read_tsv(export / "duplicates_by_source.tsv")
    assert by_source[["source_a", "source_b", "pairs", "crossing"]].values.tolist() == [
        ["dancer", "dancercopy", str(len(pairs)), "0"]]
    splits = {s: (export / "splits" / f"{s}_video_ids.txt").read_text().split() for s in ("train", "val", "test")}
    where = {c.rsplit("_", 1)[0]: s for s, ids in splits.items() for c in ids}
    assert where["dancer"] == where["dancercopy"]


def test_report_shows_the_pairs_side_by_side(run_dir):
    report = run_dir / "report.html"
    snakemake(run_dir, "--report", str(report))
    html = report.read_text(encoding="utf-8", errors="replace")
    for name in ("pairs_001.png", "duplicates.tsv", "duplicates_by_source.tsv", "Near-duplicates"):
        assert name in html, name
    m = re.search(r'"filename": "duplicates.tsv",.*?;base64,([A-Za-z0-9+/=]+)', html)
    assert m and "dancer_000\tdancercopy_000" in base64.b64decode(m.group(1)).decode()
    assert (run_dir / "results" / "duplicates" / "sheets" / "pairs_001.png").stat().st_size > 20_000


def test_a_new_source_reruns_its_stages_and_compares_only_its_clips(run_dir):
    ffmpeg("-ss", "20", "-i", str(get_footage("pianist")), "-t", "7", "-an", "-vf", "scale=320:-2",
           "-c:v", "libx264", "-preset", "veryfast", str(run_dir / "uploads" / "pianistcopy.mp4"))
    with (run_dir / "config" / "sources.tsv").open("a") as fh:
        fh.write("pianistcopy\tuploads/pianistcopy.mp4\tr\n")
    # the plan has a new unit: the units rule writes it again
    expected = {**{rule: 1 for rule in PER_UNIT}, "duplicates": 1, "duplicate_sheets": 1, "export": 1,
                "ledger": 1, "units": 1, "quality_sheets": 1, "all": 1}
    assert dry_run_jobs(run_dir) == expected
    assert jobs_ran(snakemake(run_dir)) == expected
    log = (run_dir / "results" / "logs" / "duplicates.log").read_text()
    # sources_per_job auto: the plan is kept and the new source joins the unit with less work
    # (the pianist's 7 s against 9.5 s twice), whose clips are all signed and compared again
    index = ResultsIndex(run_dir / "results")
    unit = index.unit_of("pianistcopy")
    assert index.units()[unit] == ["pianist", "pianistcopy"]
    kept = [c for c in index.clips().values() if c.unit == unit and c.kept]
    assert f"'compared': {len(kept)}," in log and "'files_new_or_changed': 1" in log
    pairs = read_tsv(run_dir / "results" / "export" / "duplicates.tsv")
    assert ("pianist", "pianistcopy") in set(zip(pairs.source_a, pairs.source_b))


def test_a_match_setting_reruns_duplicates_and_export_only(run_dir):
    set_config(run_dir, "duplicates", match={"max_frame_distance": 12, "min_similarity": 0.99, "min_overlap_s": 1.0,
                                             "mirror": True, "chunks": 3, "flips": 1})
    expected = {"duplicates": 1, "duplicate_sheets": 1, "export": 1, "all": 1}
    assert dry_run_jobs(run_dir) == expected
    assert jobs_ran(snakemake(run_dir)) == expected
    pairs = read_tsv(run_dir / "results" / "export" / "duplicates.tsv")
    # the low-quality mirrored crop falls below 0.99; the plain rescaled copy does not
    assert set(zip(pairs.source_a, pairs.source_b)) == {("pianist", "pianistcopy")}
    assert (pairs.similarity.astype(float) >= 0.99).all()
