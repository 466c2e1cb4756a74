"""Previews of the tracks: per-clip mp4s with boxes and ids, and a contact sheet PNG.

The per-clip videos are what annotators watch to assign actions to ``Person ID: n``;
the contact sheet shows every kept clip of a source (its middle frame) at a glance.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np
import pandas as pd

from microg4m.common.atomic import atomic_path
from microg4m.common.media import MediaError, iter_frames, write_h264

FONT = cv2.FONT_HERSHEY_SIMPLEX
# BGR, distinct on most footage; person n gets PALETTE[(n - 1) % len]
PALETTE = [(0, 200, 255), (255, 128, 0), (80, 220, 60), (200, 60, 255), (0, 80, 255),
           (255, 220, 0), (160, 160, 255), (0, 160, 120)]
TILE_WIDTH = 320
MAX_COLUMNS = 6
MAX_SHEET_TILES = 60  # a sheet a person can take in; memory stays flat for long sources


@dataclass
class Tile:
    clip_id: str
    frame_no: int  # 1-based
    frame: np.ndarray  # BGR
    boxes: Sequence[tuple] = field(default_factory=list)  # (person_id, x1, y1, x2, y2)


def make_tile(clip_id: str, frame_no: int, frame: np.ndarray, boxes: Sequence[tuple]) -> Tile:
    """A tile that keeps only a TILE_WIDTH-wide copy of the frame (boxes scaled to it), so
    that memory does not grow with the frame size of the source."""
    h, w = frame.shape[:2]
    s = TILE_WIDTH / w
    small = cv2.resize(frame, (TILE_WIDTH, max(1, round(h * s))), interpolation=cv2.INTER_AREA)
    return Tile(clip_id, frame_no, small, [(p, x1 * s, y1 * s, x2 * s, y2 * s) for p, x1, y1, x2, y2 in boxes])


def sheet_clips(clips: Sequence[str]) -> set[str]:
    """At most MAX_SHEET_TILES clips, evenly spread, for the contact sheet of a source."""
    if len(clips) <= MAX_SHEET_TILES:
        return set(clips)
    picks = np.linspace(0, len(clips) - 1, MAX_SHEET_TILES).round().astype(int)
    return {clips[i] for i in picks}


def label(person_id: int) -> str:
    return f"Person ID: {person_id}"


def color(person_id: int) -> tuple[int, int, int]:
    return PALETTE[(int(person_id) - 1) % len(PALETTE)]


def draw_boxes(frame: np.ndarray, boxes: Sequence[tuple], scale: float = 1.0) -> np.ndarray:
    """Draw ``(person_id, x1, y1, x2, y2)`` boxes with ``Person ID: n`` on a copy of ``frame``."""
    img = frame.copy()
    h, w = img.shape[:2]
    thick = max(1, round(min(h, w) / 240))
    fscale = max(0.35, min(h, w) / 900)
    for pid, x1, y1, x2, y2 in boxes:
        c = color(pid)
        p1 = (int(round(x1 * scale)), int(round(y1 * scale)))
        p2 = (int(round(x2 * scale)), int(round(y2 * scale)))
        cv2.rectangle(img, p1, p2, c, thick)
        text = label(pid)
        (tw, th), base = cv2.getTextSize(text, FONT, fscale, thick)
        # label above the box, or inside it when the box touches the top edge
        ty = p1[1] - base - 2 if p1[1] - th - base - 4 >= 0 else p1[1] + th + 2
        tx = min(max(0, p1[0]), max(0, w - tw - 2))
        cv2.rectangle(img, (tx, ty - th - 2), (tx + tw + 2, ty + base), c, -1)
        cv2.putText(img, text, (tx + 1, ty), FONT, fscale, (0, 0, 0), thick, cv2.LINE_AA)
    return img


def contact_sheet(tiles: Sequence[Tile], out: str | os.PathLike, title: str = "") -> Path:
    """A grid of the tiles (frame with its boxes, clip id and frame number) as a PNG."""
    if not tiles:
        img = np.full((120, 480, 3), 40, np.uint8)
        cv2.putText(img, f"{title}: no kept clips" if title else "no kept clips", (12, 66),
                    FONT, 0.7, (255, 255, 255), 1, cv2.LINE_AA)
        return _write_png(img, out)
    cells = []
    for t in tiles:
        h, w = t.frame.shape[:2]
        s = TILE_WIDTH / w
        small = cv2.resize(t.frame, (TILE_WIDTH, max(1, round(h * s))), interpolation=cv2.INTER_AREA)
        header = np.zeros((18, TILE_WIDTH, 3), np.uint8)
        caption = f"{t.clip_id}  frame {t.frame_no}  {len(t.boxes)} person(s)"
        cv2.putText(header, caption, (4, 13), FONT, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
        cells.append(np.vstack([header, draw_boxes(small, t.boxes, scale=s)]))
    cols = min(MAX_COLUMNS, len(cells))
    rows = -(-len(cells) // cols)
    ch = max(c.shape[0] for c in cells)
    pad = 4
    sheet = np.full((rows * (ch + pad) + pad, cols * (TILE_WIDTH + pad) + pad, 3), 30, np.uint8)
    for i, c in enumerate(cells):
        y, x = pad + (i // cols) * (ch + pad), pad + (i % cols) * (TILE_WIDTH + pad)
        sheet[y:y + c.shape[0], x:x + TILE_WIDTH] = c
    return _write_png(sheet, out)


def clip_preview(clip: str | os.PathLike, tracks: pd.DataFrame, out: str | os.PathLike,
                 fps: float = 30.0) -> Path:
    """Write ``clip`` with its tracks (rows of the tracks table) drawn as an H.264 mp4."""
    by_frame: dict[int, list[tuple]] = {}
    for r in tracks.itertuples(index=False):
        by_frame.setdefault(int(r.frame_id), []).append(
            (int(r.person_id), float(r.xmin), float(r.ymin), float(r.xmax), float(r.ymax)))
    frames = iter_frames(clip)
    first = next(frames, None)
    if first is None:
        raise MediaError(f"{clip}: no decodable frames")
    drawn = (draw_boxes(frame, by_frame.get(n, [])) for n, frame in enumerate(frames, start=2))
    return write_h264(itertools.chain([draw_boxes(first, by_frame.get(1, []))], drawn), out, fps=fps)


def _write_png(img: np.ndarray, out: str | os.PathLike) -> Path:
    ok, buf = cv2.imencode(".png", img)
    if not ok:
        raise RuntimeError(f"{out}: PNG encoding failed")
    out = Path(out)
    with atomic_path(out, suffix=".tmp.png") as tmp:
        tmp.write_bytes(buf.tobytes())
    return out
