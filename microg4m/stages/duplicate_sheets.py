"""Pages of the near-duplicate pairs for the Snakemake report: each pair side by side.

Per pair one row: the frame of clip_a and the frame of clip_b at the middle of the time
they share (``offset_s`` applied; a mirrored copy shows as it is), under a line with the
ids, the similarity and the offset. ``PAIRS_PER_PAGE`` rows per PNG; at most
``MAX_PAIRS`` pairs (duplicates.tsv lists them all): the most similar pair of each source
pair first, then the second of each, and so on, so that every source pair is seen before
any is seen twice. Without pairs one page says so.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np
import pandas as pd

from microg4m.common.atomic import atomic_path
from microg4m.formats.duplicates import read_pairs
from microg4m.formats.manifest import clip_file, read_manifest

log = logging.getLogger(__name__)

MAX_PAIRS = 200
PAIRS_PER_PAGE = 10
THUMB = (320, 180)  # width, height of a thumbnail box (frames are fitted inside, letterboxed)
HEADER = 30
FONT = cv2.FONT_HERSHEY_SIMPLEX


def frames_at(path: Path, times: set[float]) -> dict[float, np.ndarray | None]:
    """The BGR frame on screen at each of ``times`` (seconds), decoding the clip once, in
    order, up to the latest one (a time past the end gets the last frame; None when the
    file does not open). One pass per clip: a clip is in many pairs, and a pass per
    thumbnail took 12 s of a 138 s bench_workflow run (docs/benchmarks.md)."""
    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            return dict.fromkeys(times)
        fps = cap.get(cv2.CAP_PROP_FPS) or 30.0
        want = {t: max(0, math.floor(t * fps)) for t in times}
        needed, got, frame = set(want.values()), {}, None
        for i in range(max(needed, default=-1) + 1):
            ok, f = cap.read()
            if not ok:
                break
            frame = f
            if i in needed:
                got[i] = f
        return {t: got.get(i, frame) for t, i in want.items()}
    finally:
        cap.release()


def fit(frame: np.ndarray | None, note: str) -> np.ndarray:
    """The frame scaled into a THUMB box on dark grey, or the note where there is none."""
    w, h = THUMB
    tile = np.full((h, w, 3), 40, np.uint8)
    if frame is None:
        cv2.putText(tile, note, (10, h // 2), FONT, 0.5, (200, 200, 200), 1, cv2.LINE_AA)
        return tile
    fh, fw = frame.shape[:2]
    s = min(w / fw, h / fh)
    nw, nh = max(1, round(fw * s)), max(1, round(fh * s))
    small = cv2.resize(frame, (nw, nh), interpolation=cv2.INTER_AREA)
    y, x = (h - nh) // 2, (w - nw) // 2
    tile[y : y + nh, x : x + nw] = small
    return tile


def _times(r, durations: dict[str, float]) -> tuple[float, float]:
    """The times of clip_a and clip_b that a pair's thumbnails show: the middle of the time
    they share."""
    dur_a, dur_b = durations.get(r.clip_a, 3.0), durations.get(r.clip_b, 3.0)
    lo, hi = max(0.0, -r.offset_s), min(dur_b, dur_a - r.offset_s)  # clip_b's time shared with clip_a
    t_b = (lo + hi) / 2 if hi > lo else dur_b / 2
    return t_b + r.offset_s, t_b


def pair_row(r, files: dict[str, Path], tiles: dict[tuple[str, float], np.ndarray],
             durations: dict[str, float]) -> np.ndarray:
    """One pair: header line over the two thumbnails (``tiles``: by clip and time)."""
    thumbs = []
    for clip, t in zip((r.clip_a, r.clip_b), _times(r, durations)):
        tile = tiles.get((clip, t))
        if tile is None:
            log.warning("duplicate sheets: %s: no frame at %.2f s (%s)", clip, t, files.get(clip) or "not in any manifest")
            tile = fit(None, f"{clip}: no video")
        thumbs.append(tile)
    gap = np.full((THUMB[1], 8, 3), 255, np.uint8)
    body = np.hstack([thumbs[0], gap, thumbs[1]])
    head = np.full((HEADER, body.shape[1], 3), 255, np.uint8)
    text = (f"{r.clip_a} ~ {r.clip_b}  similarity {r.similarity:.3f}  offset {r.offset_s:+.2f} s"
            + ("  mirrored" if r.mirrored else ""))
    cv2.putText(head, text, (6, 20), FONT, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    return np.vstack([head, body])


def _tiles(show: pd.DataFrame, files: dict[str, Path], durations: dict[str, float]) -> dict:
    """The thumbnails every shown pair needs, by (clip, time); each clip decoded once."""
    wanted: dict[str, set[float]] = {}
    for r in show.itertuples():
        for clip, t in zip((r.clip_a, r.clip_b), _times(r, durations)):
            wanted.setdefault(clip, set()).add(t)
    tiles = {}
    for clip, times in wanted.items():
        path = files.get(clip)
        if path is not None and path.is_file():
            tiles.update({(clip, t): fit(f, "") for t, f in frames_at(path, times).items() if f is not None})
    return tiles


def shown(pairs: pd.DataFrame) -> pd.DataFrame:
    """The pairs the pages show, in their order (see the module docstring)."""
    rank = pairs.groupby(["source_a", "source_b"])["similarity"].rank(method="first", ascending=False)
    order = pairs.assign(_rank=rank).sort_values(["_rank", "source_a", "source_b", "clip_a", "clip_b"], kind="stable")
    return order.drop(columns="_rank").head(MAX_PAIRS)


def _write_png(path: Path, image: np.ndarray) -> None:
    ok, buf = cv2.imencode(".png", image)
    if not ok:
        raise ValueError(f"{path}: PNG encoding failed")
    with atomic_path(path) as tmp:
        tmp.write_bytes(buf.tobytes())


def run(pairs_path: str | os.PathLike, manifests: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> dict:
    """Write ``out_dir/pairs_NNN.png``; return the counts."""
    pairs = read_pairs(pairs_path)
    files, durations = {}, {}
    for m in manifests:
        df = read_manifest(m)
        for r in df[df["status"] == "ok"].itertuples(index=False):
            files[r.clip_id] = clip_file(m, r.clip_id)
            durations[r.clip_id] = r.frames / 30.0  # clips are 30 fps (trim)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("pairs_*.png"):
        stale.unlink()
    show = shown(pairs)
    width = 2 * THUMB[0] + 8
    if show.empty:
        page = np.full((80, width, 3), 255, np.uint8)
        cv2.putText(page, "no near-duplicate pairs across sources", (10, 45), FONT, 0.6, (0, 0, 0), 1, cv2.LINE_AA)
        _write_png(out / "pairs_001.png", page)
        return {"pairs": 0, "shown": 0, "pages": 1}
    tiles = _tiles(show, files, durations)
    pages = 0
    for start in range(0, len(show), PAIRS_PER_PAGE):
        rows = [pair_row(r, files, tiles, durations) for r in show.iloc[start : start + PAIRS_PER_PAGE].itertuples()]
        sep = np.full((10, width, 3), 255, np.uint8)
        page = np.vstack([x for row in rows for x in (row, sep)])
        pages += 1
        _write_png(out / f"pairs_{pages:03d}.png", page)
    return {"pairs": int(len(pairs)), "shown": int(len(show)), "pages": pages}
