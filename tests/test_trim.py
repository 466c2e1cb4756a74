"""Trim: exact 90-frame 30 fps clips from real footage of any rate and shape."""

import pandas as pd
import pytest

from conftest import ffmpeg, get_footage
from microg4m.common import media
from microg4m.stages import trim
from microg4m.formats.manifest import read_manifest


def download_table(results, source_id, **fields):
    (results / "download").mkdir(parents=True, exist_ok=True)
    table = results / "download" / f"{source_id}.tsv"
    pd.DataFrame([{"source_id": source_id, "clip_type": "r", **fields}]).to_csv(table, sep="\t", index=False)
    return table


def trim_video(tmp_path, video, source_id="src", **settings):
    """Write an ok download record for ``video`` and trim it; return the manifest."""
    results = tmp_path / "results"
    table = download_table(results, source_id, status="ok", path=str(video.resolve()), reason="")
    manifest = results / "clips" / source_id / "manifest.tsv"
    result = trim.run(table, manifest, manifest.parent / "status.tsv", **settings)[0]
    return read_manifest(manifest), result


def assert_exact_clips(df, manifest_dir, n):
    ok = df[df.status == "ok"]
    assert list(ok.seq) == list(range(n))
    for row in ok.itertuples():
        path = manifest_dir / f"{row.clip_id}.mp4"
        assert media.count_frames(path) == 90, row.clip_id
        assert media.probe(path).fps == pytest.approx(30, abs=0.01)
        assert row.start_s == 3 * row.seq


def test_known_length_gives_three_clips(tmp_path):
    src = tmp_path / "in.mp4"
    ffmpeg("-i", str(get_footage("pianist")), "-t", "10.5", "-an", "-c:v", "libx264", "-preset", "ultrafast", str(src))
    df, result = trim_video(tmp_path, src)
    assert list(df[df.status == "ok"].clip_id) == ["src_000", "src_001", "src_002"]
    assert result["clips"] == 3
    # The 1.5 s tail is recorded as dropped, not silently lost.
    tail = df[df.status == "dropped"]
    assert list(tail.seq) == [3] and "shorter than 3 s" in tail.reason.iloc[0]
    assert_exact_clips(df, tmp_path / "results/clips/src", 3)


@pytest.mark.parametrize("kind", ["25fps", "60fps", "vfr", "portrait_odd"])
def test_rates_and_shapes_give_90_frame_clips(tmp_path, kind):
    src = tmp_path / f"{kind}.mkv"
    dancer = str(get_footage("dancer"))
    args = {
        "25fps": ["-i", dancer, "-t", "6.2", "-r", "25"],
        "60fps": ["-i", dancer, "-t", "6.2", "-vf", "minterpolate=fps=60:mi_mode=dup"],
        # irregular frame intervals, kept as they are (variable frame rate)
        "vfr": ["-i", dancer, "-t", "6.5", "-vf", "setpts='(N+0.45*mod(N\\,2))/24/TB'", "-fps_mode", "passthrough"],
        "portrait_odd": ["-i", dancer, "-t", "6.2", "-vf", "scale=271:481"],
    }[kind]
    codec = ["-c:v", "ffv1"] if kind == "portrait_odd" else ["-c:v", "libx264", "-preset", "ultrafast"]
    ffmpeg(*args, "-an", *codec, str(src))
    df, _ = trim_video(tmp_path, src)
    assert_exact_clips(df, tmp_path / "results/clips/src", 2)
    if kind == "portrait_odd":
        assert (df.width % 2 == 0).all() and (df.height > df.width).all()


def test_max_height_scales_down(tmp_path):
    src = tmp_path / "big.mp4"
    ffmpeg("-i", str(get_footage("pianist")), "-t", "3.2", "-an", "-c:v", "libx264", "-preset", "ultrafast", str(src))
    df, _ = trim_video(tmp_path, src, max_height=240)
    assert (df.height == 240).all() and (df.width == 320).all()


def test_failed_download_gives_no_clips(tmp_path):
    results = tmp_path / "results"
    table = download_table(results, "gone", status="failed", reason="HTTP 404", path="")
    out = results / "clips" / "gone"
    result = trim.run(table, out / "manifest.tsv", out / "status.tsv")[0]
    assert result["status"] == "skipped" and "HTTP 404" in result["reason"]
    assert read_manifest(out / "manifest.tsv").empty


def test_undecodable_source_is_recorded(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_text("this is not a video")
    df, result = trim_video(tmp_path, bad)
    assert df.empty and result["status"] == "failed" and "bad.mp4" in result["reason"]


def test_sources_whose_names_extend_each_other_keep_their_clips_in_one_unit(tmp_path):
    """talk_2 is trimmed first, then talk into the same unit folder: talk's clean-up of its
    leftovers (``talk_<seq>.mp4``) must not take talk_2's clips."""
    src = tmp_path / "in.mp4"
    ffmpeg("-i", str(get_footage("pianist")), "-t", "6.5", "-an", "-c:v", "libx264", "-preset", "ultrafast", str(src))
    results = tmp_path / "results"
    (results / "download").mkdir(parents=True)
    table = results / "download" / "batch00000.tsv"
    pd.DataFrame([{"source_id": sid, "clip_type": "r", "status": "ok", "path": str(src.resolve()), "reason": ""}
                  for sid in ("talk_2", "talk")]).to_csv(table, sep="\t", index=False)
    unit = results / "clips" / "batch00000"
    statuses = trim.run(table, unit / "manifest.tsv", unit / "status.tsv")
    assert [(s["source_id"], s["clips"]) for s in statuses] == [("talk_2", 2), ("talk", 2)]
    df = read_manifest(unit / "manifest.tsv")
    ok = df[df.status == "ok"]
    assert list(ok.clip_id) == ["talk_2_000", "talk_2_001", "talk_000", "talk_001"]
    assert all((unit / f"{c}.mp4").is_file() for c in ok.clip_id)


def test_segments_are_ordered_by_number_past_a_thousand(tmp_path):
    """A 50-minute source gives more than 1,000 segments: src_1000 comes after src_999 (a
    name sort puts it before src_101), so the last one, checked as the short final
    clip, is src_1000; another source's files (src_2_000) are not src's."""
    for seq in range(1001):
        (tmp_path / f"src_{seq:03d}.mp4").touch()
    for other in ("src_2_000.mp4", "src_01.mp4", "src_000.mp4.part", "xsrc_005.mp4"):
        (tmp_path / other).touch()
    files = trim.segment_files(tmp_path, "src")
    assert [p.name for p in files] == [f"src_{seq:03d}.mp4" for seq in range(1001)]
    assert files[-1].name == "src_1000.mp4"
