"""Scenes stage: real PySceneDetect on clips made by joining two real videos."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ffmpeg, get_footage, make_clip
from microg4m.formats import manifest as mf
from microg4m.common import media
from microg4m.stages import scenes
from microg4m.formats.scenes import parse_cuts, read_scenes


def joined_clip(a: Path, b: Path, cut: int, out: Path, total: int = 90) -> Path:
    """A 30 fps 640x480 clip: frames 1..cut-1 from ``a``, cut..total from ``b`` (the new shot
    starts at 1-based frame ``cut``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    norm = "fps=30,scale=640:480,setsar=1"
    fc = (f"[0:v]{norm},trim=end_frame={cut - 1},setpts=PTS-STARTPTS[a];"
          f"[1:v]{norm},trim=end_frame={total - cut + 1},setpts=PTS-STARTPTS[b];[a][b]concat=n=2:v=1:a=0[v]")
    ffmpeg("-ss", "1", "-i", str(a), "-ss", "2", "-i", str(b), "-filter_complex", fc, "-map", "[v]", "-r", "30",
           "-an", "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", str(out))
    assert media.count_frames(out) == total
    return out


@pytest.fixture(scope="module")
def cut_clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips") / "src"
    dancer, pianist = get_footage("dancer"), get_footage("pianist")
    return {
        "src_000": make_clip(dancer, folder / "src_000.mp4", start=1),
        "src_001": joined_clip(dancer, pianist, 7, folder / "src_001.mp4"),
        "src_002": joined_clip(dancer, pianist, 80, folder / "src_002.mp4"),
    }


def test_cuts_near_both_ends_are_found(cut_clips):
    assert scenes.clip_cuts(cut_clips["src_000"]) == []
    assert scenes.clip_cuts(cut_clips["src_001"]) == [7]
    assert scenes.clip_cuts(cut_clips["src_002"]) == [80]


def test_default_min_scene_len_hides_an_early_cut(cut_clips):
    """Why scenes.min_scene_len is 1: PySceneDetect's default (15 frames) drops the cut at frame 7."""
    assert scenes.clip_cuts(cut_clips["src_001"], min_scene_len=15) == []
    assert scenes.clip_cuts(cut_clips["src_002"], min_scene_len=15) == [80]


def test_run_writes_table_for_ok_clips(cut_clips, tmp_path):
    manifest = cut_clips["src_000"].parent / "manifest.tsv"
    rows = [dict(clip_id=c, source_id="src", clip_type="r", seq=i, start_s=3 * i, frames=90, width=640,
                 height=480, status="ok", reason="") for i, c in enumerate(cut_clips)]
    rows.append(dict(clip_id="src_003", source_id="src", clip_type="r", seq=3, start_s=9, frames=40, width=640,
                     height=480, status="dropped", reason="40 frames"))
    mf.write_manifest(manifest, rows)
    out = tmp_path / "scenes" / "src.tsv"
    scenes.run(manifest, out)
    assert out.read_text() == "clip_id\tcuts\tgradual\nsrc_000\t\t\nsrc_001\t7\t\nsrc_002\t80\t\n"
    back = read_scenes(out)
    assert back["cuts"].tolist() == [[], [7], [80]]
    assert back["gradual"].tolist() == [[], [], []]  # PySceneDetect tells no gradual transition


@pytest.mark.parametrize("detector, threshold", [("adaptive", 3.0), ("hash", 0.395), ("histogram", 0.05)])
def test_other_detectors_find_the_cut(cut_clips, detector, threshold):
    assert scenes.clip_cuts(cut_clips["src_002"], detector=detector, threshold=threshold) == [80]


def test_threshold_mapping():
    import scenedetect

    det = scenes.make_detector("threshold", 20, 1)
    assert isinstance(det, scenedetect.ThresholdDetector) and det.threshold == 20
    det = scenes.make_detector("adaptive", 5, 1)
    assert isinstance(det, scenedetect.AdaptiveDetector) and det.adaptive_threshold == 5
    assert isinstance(scenes.make_detector("content", 40, 1), scenedetect.ContentDetector)


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match=r"scenes\.detector = 'fast'"):
        scenes.make_detector("fast")
    with pytest.raises(ValueError, match="not a PySceneDetect detector"):
        scenes.make_detector("transnetv2")
    with pytest.raises(ValueError, match=r"scenes\.min_scene_len = 0"):
        scenes.make_detector("content", 40, 0)


def test_cut_format_roundtrip():
    assert scenes.format_cuts([7, 80]) == "7;80"
    assert parse_cuts("7;80") == [7, 80]
    assert parse_cuts("") == [] and parse_cuts(float("nan")) == []
