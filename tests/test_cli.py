"""The microg4m console script runs single stages outside Snakemake."""

import subprocess
import sys

import pandas as pd
import pytest

from conftest import ffmpeg, get_footage

STAGES = ["download", "trim", "detect", "scenes", "filter", "quality", "motion", "track", "corrections", "track-files", "export",
          "ledger", "verify", "demo-media", "signatures", "reference-signatures", "duplicates", "where", "labels"]


def cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "microg4m.cli", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return proc


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_has_help(stage):
    out = cli(stage, "--help").stdout
    assert out.startswith(f"usage: microg4m {stage}")


def test_trim_then_scenes_on_a_video(tmp_path):
    video = tmp_path / "walk.mp4"
    ffmpeg("-i", str(get_footage("pianist")), "-t", "6.5", "-an", "-c:v", "libx264", "-preset", "ultrafast", str(video))
    cli("trim", str(video), str(tmp_path / "out"), "--max-height", "240")
    manifest = tmp_path / "out" / "clips" / "walk" / "manifest.tsv"
    df = pd.read_csv(manifest, sep="\t")
    assert list(df[df.status == "ok"].clip_id) == ["walk_000", "walk_001"] and set(df.height) == {240}
    cli("scenes", str(manifest), str(tmp_path / "scenes.tsv"))
    scenes = pd.read_csv(tmp_path / "scenes.tsv", sep="\t", keep_default_na=False)
    assert list(scenes.clip_id) == ["walk_000", "walk_001"] and list(scenes.cuts) == ["", ""]
    cli("quality", str(manifest), str(tmp_path / "scenes.tsv"), str(tmp_path / "quality.tsv"), "--every", "10")
    scores = pd.read_csv(tmp_path / "quality.tsv", sep="\t", keep_default_na=False)
    assert list(scores.clip_id) == ["walk_000", "walk_001"] and list(scores.camera) == ["static", "static"]


@pytest.mark.parametrize("clip_type", ["r", "m"])
def test_trim_clip_type_is_that_of_the_clips(tmp_path, clip_type):
    video = tmp_path / "walk.mp4"
    ffmpeg("-i", str(get_footage("pianist")), "-t", "3.5", "-an", "-c:v", "libx264", "-preset", "ultrafast", str(video))
    cli("trim", str(video), str(tmp_path / "out"), "--max-height", "120", "--clip-type", clip_type)
    df = pd.read_csv(tmp_path / "out" / "clips" / "walk" / "manifest.tsv", sep="\t", dtype=str)
    assert list(df[df.status == "ok"].clip_id) == ["walk_000"] and set(df.clip_type) == {clip_type}
    record = pd.read_csv(tmp_path / "out" / "download" / "walk.tsv", sep="\t", dtype=str)
    assert list(record.clip_type) == [clip_type]


def test_bad_input_gives_a_clear_error(tmp_path):
    bad = tmp_path / "notes.mp4"
    bad.write_text("not a video")
    proc = cli("trim", str(bad), str(tmp_path / "out"), check=False)
    assert proc.returncode == 1
    assert "microg4m trim: error:" in proc.stderr and "notes.mp4" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_weights_setting_is_named(tmp_path):
    manifest = tmp_path / "manifest.tsv"
    manifest.write_text("clip_id\tsource_id\tclip_type\tseq\tstart_s\tframes\twidth\theight\tstatus\treason\n")
    proc = cli("detect", str(manifest), str(tmp_path / "d.parquet"), "--weights", str(tmp_path / "nope.pt"), check=False)
    assert proc.returncode == 1 and "detect.weights" in proc.stderr


def test_signatures_of_two_videos_and_their_pair(tmp_path):
    """Any two videos signed as two sets; a mirrored copy is one mirrored pair."""
    orig, copy = tmp_path / "orig.mp4", tmp_path / "copy.mp4"
    ffmpeg("-ss", "5", "-i", str(get_footage("dancer")), "-t", "4", "-an", "-c:v", "libx264", str(orig))
    ffmpeg("-i", str(orig), "-vf", "hflip", "-an", "-c:v", "libx264", "-crf", "35", str(copy))
    for name, video in (("a", orig), ("b", copy)):
        cli("reference-signatures", name, str(tmp_path / f"{name}.parquet"), str(video), "--step-s", "0.2")
    cli("duplicates", str(tmp_path / "pairs.tsv"), str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"),
        "--cache", str(tmp_path / "cache"), "--step-s", "0.2")
    pairs = pd.read_csv(tmp_path / "pairs.tsv", sep="\t")
    assert pairs[["clip_a", "clip_b", "source_a", "source_b", "mirrored"]].values.tolist() == [
        ["orig", "copy", "a", "b", True]]
    assert pairs.similarity.iloc[0] > 0.8 and pairs.offset_s.iloc[0] == 0
    cli("duplicates", str(tmp_path / "none.tsv"), str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"),
        "--cache", str(tmp_path / "cache2"), "--no-mirror", "--step-s", "0.2")
    assert pd.read_csv(tmp_path / "none.tsv", sep="\t").empty


def test_where_names_the_unit_of_a_clip_or_source_and_its_files(tmp_path):
    """Under sources_per_job: auto a unit holds several sources; a folder of an earlier plan
    (one source per job) is still there and is not the answer."""
    import json

    from test_annotate_store import PER_SOURCE, UNITS, build_results

    res = build_results(tmp_path / "results", units=PER_SOURCE, plan=False)
    build_results(res, units=UNITS)
    (unit,) = UNITS
    for name in ("film_000", "film", unit):
        out = json.loads(subprocess.run([sys.executable, "-m", "microg4m.cli", "where", name], cwd=tmp_path,
                                        capture_output=True, text=True, check=True).stdout)
        assert out["unit"] == unit and out["sources"] == UNITS[unit]
        assert out["files"]["tracks"] == out["files"]["final_tracks"] == f"results/tracks/{unit}.csv"
        assert out["forcerun"] == f"snakemake --cores all --forcerun results/tracks/{unit}.csv"
    assert out.get("clip") is None
    proc = subprocess.run([sys.executable, "-m", "microg4m.cli", "where", "film_000"], cwd=tmp_path,
                          capture_output=True, text=True, check=True)
    clip = json.loads(proc.stdout)["clip"]
    assert clip == {"clip_id": "film_000", "source_id": "film", "trim": "ok", "keep": True, "reason": "kept",
                    "persons": [1]}
    assert "results/clips/film: a folder of no unit" in proc.stderr  # the leftover is named
    bad = cli("where", "nope", "--results", str(res), check=False)
    assert bad.returncode == 1 and f"'nope' is no clip, source or unit of {res.resolve()}" in bad.stderr
