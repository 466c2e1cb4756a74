"""Wipes (microg4m.common.wipes), which TransNetV2 misses: found by ``scenes.detector:
transnetv2 | both`` as gradual transitions in clips made with ffmpeg's xfade from real
footage (an edge moving left, one moving up), and not in a clean clip, a hard cut, a pan,
a zoom or a person crossing a still background."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import get_footage, make_clip
from microg4m.common import wipes
from microg4m.common.footage import camera_clip, transition_clip
from microg4m.stages import scenes

# the wipe: 1 s (30 frames) from frame 31, so frames 31-60 differ from the old shot
FIRST, LAST = 31, 60


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wipes")
    dancer, pianist, vtest = get_footage("dancer"), get_footage("pianist"), get_footage("vtest")
    return {
        "left": transition_clip(dancer, pianist, folder / "left.mp4", kind="wipe", at=FIRST, seconds=1.0,
                                a_start=1, b_start=20),
        "up": transition_clip(vtest, dancer, folder / "up.mp4", kind="wipe_up", at=FIRST, seconds=1.0,
                              a_start=2, b_start=5),
        "cut": transition_clip(dancer, pianist, folder / "cut.mp4", kind="cut", at=46, a_start=2, b_start=40),
        "clean": make_clip(dancer, folder / "clean.mp4", start=6),
        "walkers": make_clip(vtest, folder / "walkers.mp4", start=20),
        "pan": camera_clip(pianist, folder / "pan.mp4", kind="pan", speed=6),
        "zoom": camera_clip(get_footage("bus"), folder / "zoom.mp4", kind="zoom", speed=4),
    }


@pytest.mark.parametrize("clip, axis", [("left", "x"), ("up", "y")])
def test_a_wipe_is_found_on_its_frames(clips, clip, axis):
    found = wipes.find_wipes(wipes.small_gray(clips[clip]))
    assert [w.axis for w in found] == [axis]
    assert FIRST - 2 <= found[0].first <= found[0].last <= LAST + 2
    assert found[0].last - found[0].first >= 20  # the sweep, not one step of it


@pytest.mark.parametrize("clip", ["cut", "clean", "walkers", "pan", "zoom"])
def test_no_wipe_where_there_is_none(clips, clip):
    assert wipes.find_wipes(wipes.small_gray(clips[clip])) == []


@pytest.mark.parametrize("clip", ["left", "up"])
def test_transnetv2_and_both_report_a_wipe_as_gradual(clips, clip, tmp_path):
    """TransNetV2 alone misses the wipe; the scenes stage's table has it as gradual,
    inside the wipe's frames; the content detector (the paper's, the default) does not."""
    from microg4m.engines import transnet

    predictions = scenes.predictions_of({clip: clips[clip]}, tmp_path, unit="u")[clip]
    assert not [t for t in transnet.transitions(*predictions) if t.first <= LAST and t.last >= FIRST]
    for detector in ("transnetv2", "both"):
        cuts, gradual = scenes.clip_transitions(clips[clip], detector=detector, predictions=predictions)
        assert len(gradual) == 1 and gradual == cuts, detector
        assert FIRST <= gradual[0] <= LAST + 1
    assert scenes.clip_cuts(clips[clip]) == []


def _picture(seed: int, h: int = 60, w: int = 80) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 255, (h, w)).astype(np.float32)


def test_a_sweep_that_changes_the_picture_is_a_wipe_and_a_passing_bar_is_not():
    """Pure logic on made-up frames: a new picture uncovered column by column is a wipe
    (either direction); a bar that crosses and leaves the old picture behind is not."""
    old, new = _picture(1), _picture(2)
    frames = []
    for k in range(40):
        edge = min(80, max(0, (k - 5) * 4))  # columns 0..edge show the new picture, from step 5 to 25
        f = old.copy()
        f[:, :edge] = new[:, :edge]
        frames.append(f)
    frames = np.asarray(frames)
    assert [(w.axis, w.first, w.last) for w in wipes.find_wipes(frames)] == [("x", 7, 26)]
    assert [w.axis for w in wipes.find_wipes(frames[:, :, ::-1])] == ["x"]  # the edge moving the other way
    assert [w.axis for w in wipes.find_wipes(np.transpose(frames, (0, 2, 1)))] == ["y"]

    bar = []
    for k in range(40):
        f = old.copy()
        x = (k - 5) * 4
        if 0 <= x < 80:
            f[:, x:x + 8] = 255.0
        bar.append(f)
    assert wipes.find_wipes(np.asarray(bar)) == []
    assert wipes.find_wipes(np.asarray([old] * 20 + [new] * 20)) == []  # a hard cut


def test_an_unreadable_video_is_named(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video")
    with pytest.raises(Exception, match="bad.mp4"):
        wipes.small_gray(bad)
