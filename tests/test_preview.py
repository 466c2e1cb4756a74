"""Previews: contact sheet PNG and per-clip H.264 mp4s with boxes and ids, on real footage."""

from __future__ import annotations

import subprocess

import cv2
import numpy as np
import pandas as pd
import pytest

from conftest import get_footage, make_clip
from microg4m.common import media
from microg4m.report import preview
from microg4m.stages.track import COLUMNS


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_clip(get_footage("dancer"), tmp_path_factory.mktemp("preview") / "d_000.mp4")


def tracks(frames, box=(150, 80, 350, 470), pid=1):
    return pd.DataFrame([("d_000", f, pid, *box, 0.9) for f in frames], columns=COLUMNS)


def test_draw_boxes_colour_and_label():
    frame = np.zeros((200, 300, 3), np.uint8)
    img = preview.draw_boxes(frame, [(2, 50, 60, 150, 190)])
    assert (frame == 0).all()  # a copy is drawn on
    assert tuple(img[120, 50]) == preview.color(2)  # left edge
    assert tuple(img[120, 100]) == (0, 0, 0)  # inside
    assert (img[40:58, 50:120] == preview.color(2)).all(axis=2).any()  # label background
    assert preview.label(2) == "Person ID: 2"


def test_contact_sheet(clip, tmp_path):
    frames = media.read_frames(clip)
    tiles = [preview.Tile("d_000", 45, frames[44], [(1, 150, 80, 350, 470)]),
             preview.Tile("d_001", 45, frames[10], [])]
    out = preview.contact_sheet(tiles, tmp_path / "sheet.png", title="d")
    img = cv2.imread(str(out))
    h, w = frames[0].shape[:2]
    assert img.shape[1] == 2 * (preview.TILE_WIDTH + 4) + 4
    assert img.shape[0] == round(h * preview.TILE_WIDTH / w) + 18 + 8
    assert (img == preview.color(1)).all(axis=2).sum() > 200  # the box is drawn
    again = preview.contact_sheet(tiles, tmp_path / "again.png", title="d")
    assert again.read_bytes() == out.read_bytes()
    empty = cv2.imread(str(preview.contact_sheet([], tmp_path / "empty.png", title="d")))
    assert empty.shape == (120, 480, 3) and empty.max() > 200  # says so in white


def test_clip_preview_is_h264_with_boxes(clip, tmp_path):
    out = preview.clip_preview(clip, tracks(range(11, 91)), tmp_path / "p" / "d_000.mp4")
    assert media.count_frames(out) == 90
    info = subprocess.run([media.ffmpeg_exe(), "-hide_banner", "-i", str(out)],
                          capture_output=True, text=True).stderr
    assert "h264" in info and "yuv420p" in info
    frames = media.read_frames(out)
    c = np.array(preview.color(1), int)
    edge = lambda f: np.abs(f[200:400, 149:152].astype(int) - c).sum(axis=2).min()  # noqa: E731
    assert edge(frames[20]) < 60  # the box's left edge (lossy video: near the colour)
    assert edge(frames[5]) > 60  # no box before frame 11
    assert not list(out.parent.glob(".*"))


def test_contact_sheet_is_capped_and_tiles_are_small():
    import numpy as np

    from microg4m.report import preview

    clips = [f"s_{i:03d}" for i in range(400)]
    picked = preview.sheet_clips(clips)
    assert len(picked) == preview.MAX_SHEET_TILES and {"s_000", "s_399"} <= picked
    assert preview.sheet_clips(clips[:5]) == set(clips[:5])
    tile = preview.make_tile("s_000", 45, np.zeros((1080, 1920, 3), np.uint8), [(1, 960, 540, 1920, 1080)])
    assert tile.frame.shape[1] == preview.TILE_WIDTH
    assert tile.boxes == [(1, 160.0, 90.0, 320.0, 180.0)]
