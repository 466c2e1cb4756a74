"""Motion level: sparse optical flow scores on real footage (still, pan, pan scaled x2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from conftest import ffmpeg, get_footage
from microg4m.formats import manifest as mf
from microg4m.common import media
from microg4m.stages import motion
from microg4m.formats.motion import read_motion

X264 = ("-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p")


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """m_000 zidane still (loop, no zoom), m_001 pan over bus.jpg at 4 px/frame, m_002 the
    same pan scaled x2."""
    d = tmp_path_factory.mktemp("motion") / "clips" / "m"
    d.mkdir(parents=True)
    ffmpeg("-loop", "1", "-i", str(get_footage("zidane")), "-t", "3", "-r", "30",
           "-vf", "scale=640:360", *X264, str(d / "m_000.mp4"))
    ffmpeg("-loop", "1", "-i", str(get_footage("bus")), "-t", "3", "-r", "30",
           "-vf", "crop=400:400:'t*120':300", *X264, str(d / "m_001.mp4"))
    ffmpeg("-i", str(d / "m_001.mp4"), "-vf", "scale=800:800", *X264, str(d / "m_002.mp4"))
    rows = []
    for i in range(3):
        info = media.probe(d / f"m_{i:03d}.mp4")
        rows.append(dict(clip_id=f"m_{i:03d}", source_id="m", clip_type="r", seq=i, start_s=3 * i,
                         frames=90, width=info.width, height=info.height, status="ok", reason=""))
    rows.append(dict(rows[0], clip_id="m_003", seq=3, status="dropped", reason="short"))
    mf.write_manifest(d / "manifest.tsv", rows)
    return d


def test_still_is_low_and_pan_is_high(clips):
    still = motion.clip_motion(clips / "m_000.mp4")
    pan = motion.clip_motion(clips / "m_001.mp4")
    assert still.pairs == pan.pairs == 29  # the first 30 frames
    assert still.score < 1 and motion.level(still) == "low"
    assert pan.score > 95 and motion.level(pan) == "high"
    # about 4 px per frame for every tracked point
    assert pan.score_norm * math.hypot(400, 400) == pytest.approx(4.0, rel=0.15)


def test_score_norm_is_resolution_independent(clips):
    a = motion.clip_motion(clips / "m_001.mp4")
    b = motion.clip_motion(clips / "m_002.mp4")
    assert b.score_norm == pytest.approx(a.score_norm, rel=0.1)
    assert b.score > 1.5 * a.score  # the reference score is not


def test_run_writes_the_table(clips, tmp_path):
    out = tmp_path / "motion" / "m.tsv"
    motion.run(clips / "manifest.tsv", out)
    df = pd.read_csv(out, sep="\t", dtype=str)
    assert list(df.columns) == motion.COLUMNS
    assert list(df["clip_id"]) == ["m_000", "m_001", "m_002"]  # ok clips only
    assert list(df["level"]) == ["low", "high", "high"]
    assert len(df.loc[1, "score"].split(".")[1]) == 3 and len(df.loc[1, "score_norm"].split(".")[1]) == 6
    first = out.read_bytes()
    motion.run(clips / "manifest.tsv", out)
    assert out.read_bytes() == first
    # the normalized method with its own threshold
    motion.run(clips / "manifest.tsv", out, method="normalized", normalized_high_threshold=0.005)
    assert list(pd.read_csv(out, sep="\t")["level"]) == ["low", "high", "high"]
    motion.run(clips / "manifest.tsv", out, method="normalized", normalized_high_threshold=0.02)
    assert list(pd.read_csv(out, sep="\t")["level"]) == ["low", "low", "low"]
    assert read_motion(out) == {"m_000": "low", "m_001": "low", "m_002": "low"}


def test_flow_scores_of_a_known_shift():
    """Pure function: a textured image moving 3 px right per frame."""
    rng = np.random.default_rng(0)
    base = (rng.random((60, 80)) > 0.5).astype(np.uint8) * 255
    base = np.kron(base, np.ones((6, 6), np.uint8))  # 360x480 blocks: good corners
    frames = [np.roll(base, 3 * k, axis=1)[:, 60:420] for k in range(10)]
    m = motion.flow_scores(frames)
    assert m.pairs == 9 and m.points > 20
    assert m.score_norm * math.hypot(360, 360) == pytest.approx(3.0, rel=0.05)
    assert m.score == pytest.approx(3.0 * m.points, rel=0.1)


def _blocks(seed=0):
    rng = np.random.default_rng(seed)
    base = (rng.random((60, 80)) > 0.5).astype(np.uint8) * 255
    return np.kron(base, np.ones((6, 6), np.uint8))  # 360x480 blocks: good corners


def test_reference_score_sums_absolute_coordinates():
    """The reference's np.linalg.norm(axis=1) of (n, 1, 2) arrays is |dx| + |dy| per point:
    a diagonal shift of (3, 4) px scores 7 per point, not 5."""
    base = _blocks()
    frames = [np.roll(np.roll(base, 3 * k, axis=1), 4 * k, axis=0)[60:300, 60:420] for k in range(6)]
    m = motion.flow_scores(frames)
    assert m.pairs == 5 and m.points > 20
    assert m.score == pytest.approx(7.0 * m.points, rel=0.05)
    assert m.score_norm * math.hypot(360, 240) == pytest.approx(5.0, rel=0.05)  # ours: Euclidean


def test_lost_corners_stop_the_measurement():
    """When every point is lost (here: the picture turns flat grey) the reference stops and
    averages the pairs measured so far; zero-motion pairs are not counted."""
    base = _blocks()
    moving = [np.roll(base, 3 * k, axis=1)[:, 60:420] for k in range(4)]
    grey = [np.full_like(moving[0], 128)] * 26
    m = motion.flow_scores(moving + grey)
    full = motion.flow_scores(moving)
    assert full.pairs == 3
    # the pair into the grey frame may still "track" points (with nonsense moves); after it
    # nothing is left
    assert m.pairs in (3, 4)
    if m.pairs == 3:
        assert m.score == pytest.approx(full.score)
    assert m.score >= 0.9 * full.score  # not diluted by 26 zero-motion pairs
    # a flat first frame has no corners at all: no pair, score 0, low
    none = motion.flow_scores(grey)
    assert none.points == 0 and none.pairs == 0 and motion.level(none) == "low"


def test_bad_settings(clips, tmp_path):
    with pytest.raises(ValueError, match="motion method"):
        motion.run(clips / "manifest.tsv", tmp_path / "m.tsv", method="dense")
    with pytest.raises(ValueError, match="at least 2 frames"):
        motion.clip_motion(clips / "m_000.mp4", frames=1)
    with pytest.raises(media.MediaError):
        motion.clip_motion(tmp_path / "missing.mp4")
