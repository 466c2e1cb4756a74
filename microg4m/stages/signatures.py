"""Signatures stage: a perceptual hash sequence per kept clip, for finding re-uploads.

A clip's signature is the 64-bit pHash (``imagehash.phash``) of frames sampled every
``step_s`` seconds, at ``(k + 0.5) * step_s`` for k = 0, 1, ... (by time, not by frame
index, so the frame rate does not matter), each with the pHash of its mirror image.
What it survives, and why:

- re-encoding, rescaling: pHash keeps only the signs of the 8x8 lowest DCT frequencies
  of a 32x32 grey thumbnail, which compression and scaling hardly change;
- letterboxing: black bars along the edges (the union over the sampled frames) are cut
  off before hashing;
- a crop of about 10 %: the low frequencies move little (about 10 of 64 bits; the
  duplicates stage allows that);
- mirroring: the mirrored frame's hash is kept too, so a mirrored copy is matched;
- a shifted start or another frame rate: the duplicates stage aligns the sequences.

Flat frames (fades, black, a blank wall: grey level spread below ``min_contrast``) give
arbitrary hashes; they are kept with ``informative = False`` and never matched.

One table per unit, ``signatures/{unit}.parquet``, one row per sampled frame:
``clip_id, source_id, t_s, hash, mirror, informative`` (hashes as signed 64-bit
integers: parquet has no unsigned type every reader takes). A clip that cannot be
decoded is logged and left out; the rest goes on.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
from pathlib import Path
from typing import Iterable

import cv2
import imagehash
import numpy as np
import pandas as pd
from PIL import Image

from microg4m.common.atomic import atomic_path
from microg4m.formats.decisions import kept_ids, read_decisions
from microg4m.formats.manifest import clip_file, read_manifest
from microg4m.common.progress import progress
from microg4m.formats.signatures import COLUMNS

log = logging.getLogger(__name__)

THUMB = 64  # frames are reduced to THUMB x THUMB grey before hashing (pHash then takes 32x32)


def decode_samples(path: str | os.PathLike, step_s: float) -> tuple[np.ndarray, list[np.ndarray]]:
    """The grey frames on screen at ``(k + 0.5) * step_s``, k = 0, 1, ... up to the end.

    The frame on screen at t is frame ``floor(t * fps)``; frames are decoded in order
    (never counted from the container) and only the sampled ones are converted.
    """
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise ValueError(f"{path}: cannot open video")
    try:
        fps = cap.get(cv2.CAP_PROP_FPS) or 0.0
        if fps <= 0:
            raise ValueError(f"{path}: no frame rate in the stream")
        times, frames = [], []
        nxt, last = 0, None  # nxt: index of the next frame to decode
        for k in itertools.count():
            t = (k + 0.5) * step_s
            idx = math.floor(t * fps + 1e-9)
            while nxt <= idx:
                if nxt < idx:
                    ok = cap.grab()
                else:
                    ok, frame = cap.read()
                    if ok:
                        last = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
                if not ok:
                    break
                nxt += 1
            if nxt <= idx:  # the video ended before t
                break
            times.append(t)
            frames.append(last)  # a step shorter than a frame repeats the frame on screen
        if not frames:
            raise ValueError(f"{path}: no frame could be decoded")
        return np.asarray(times), frames
    finally:
        cap.release()


def content_box(frames: list[np.ndarray], level: int) -> tuple[int, int, int, int]:
    """(y0, y1, x0, x1) of the picture inside black letterbox / pillarbox bars.

    A row or column is a bar when, in every sampled frame, under 2 % of its pixels are
    brighter than ``level``. If that leaves under half of the frame (a dark clip), the
    whole frame is used.
    """
    bright = np.zeros(frames[0].shape, dtype=bool)
    for f in frames:
        bright |= f > level
    h, w = bright.shape
    rows = np.flatnonzero(bright.mean(axis=1) >= 0.02)
    cols = np.flatnonzero(bright.mean(axis=0) >= 0.02)
    if len(rows) == 0 or len(cols) == 0:
        return 0, h, 0, w
    y0, y1, x0, x1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    if (y1 - y0) < h / 2 or (x1 - x0) < w / 2:
        return 0, h, 0, w
    return int(y0), int(y1), int(x0), int(x1)


def as_int64(h: imagehash.ImageHash) -> int:
    """A 64-bit ImageHash as a signed 64-bit integer (bit 63 first)."""
    return int(np.packbits(h.hash.ravel()).view(">u8")[0].astype(np.int64))


def hash_frames(frames: list[np.ndarray], border_level: int, min_contrast: float):
    """(hash, mirror hash, informative) per frame, after cutting the letterbox bars."""
    y0, y1, x0, x1 = content_box(frames, border_level)
    out = []
    for f in frames:
        small = cv2.resize(f[y0:y1, x0:x1], (THUMB, THUMB), interpolation=cv2.INTER_AREA)
        informative = float(small.std()) >= min_contrast
        img = Image.fromarray(small)
        out.append((as_int64(imagehash.phash(img)), as_int64(imagehash.phash(img.transpose(Image.FLIP_LEFT_RIGHT))),
                    informative))
    return out


def video_signature(path: str | os.PathLike, *, step_s: float = 0.1, border_level: int = 24,
                    min_contrast: float = 6.0) -> pd.DataFrame:
    """``t_s, hash, mirror, informative`` rows of one video file."""
    times, frames = decode_samples(path, step_s)
    rows = hash_frames(frames, border_level, min_contrast)
    return pd.DataFrame({"t_s": np.round(times, 6), "hash": np.array([r[0] for r in rows], dtype=np.int64),
                         "mirror": np.array([r[1] for r in rows], dtype=np.int64),
                         "informative": np.array([r[2] for r in rows], dtype=bool)})


def empty() -> pd.DataFrame:
    return pd.DataFrame({"clip_id": pd.Series(dtype=str), "source_id": pd.Series(dtype=str),
                         "t_s": pd.Series(dtype=float), "hash": pd.Series(dtype=np.int64),
                         "mirror": pd.Series(dtype=np.int64), "informative": pd.Series(dtype=bool)})


def sign(videos: Iterable[tuple[str, str, Path]], **settings) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Signatures of ``(clip_id, source_id, path)`` videos; returns (table, [(clip_id, why)])."""
    parts, failed = [], []
    videos = list(videos)
    for clip, source, path in progress(videos, "signatures", total=len(videos)):
        try:
            sig = video_signature(path, **settings)
        except (ValueError, cv2.error) as exc:
            log.error("signatures: %s: %s; no signature", clip, exc)
            failed.append((clip, str(exc)))
            continue
        parts.append(sig.assign(clip_id=clip, source_id=source)[COLUMNS])
    return (pd.concat(parts, ignore_index=True) if parts else empty()), failed


def write_signatures(path: str | os.PathLike, table: pd.DataFrame) -> None:
    with atomic_path(path, suffix=".tmp.parquet") as tmp:
        table[COLUMNS].to_parquet(tmp, index=False)


def run(manifest: str | os.PathLike, decisions: str | os.PathLike, out: str | os.PathLike, *,
        step_s: float = 0.1, border_level: int = 24, min_contrast: float = 6.0) -> dict:
    """Signatures of the kept clips of a unit (manifest + filter decisions) into ``out``."""
    clips = read_manifest(manifest)
    keep = set(kept_ids(read_decisions(decisions)))
    rows = clips[(clips["status"] == "ok") & clips["clip_id"].isin(keep)].sort_values("clip_id")
    videos = [(r.clip_id, r.source_id, clip_file(manifest, r.clip_id)) for r in rows.itertuples(index=False)]
    table, failed = sign(videos, step_s=step_s, border_level=border_level, min_contrast=min_contrast)
    write_signatures(out, table)
    return {"clips": len(videos) - len(failed), "failed": len(failed), "samples": int(len(table))}


def run_videos(videos: list[str | os.PathLike], out: str | os.PathLike, *, set_name: str,
               step_s: float = 0.1, border_level: int = 24, min_contrast: float = 6.0) -> dict:
    """Signatures of any video files (e.g. a public test set, to flag contamination):
    each file is one clip named by its file stem, all of source ``set_name``."""
    items = [(Path(v).stem, set_name, Path(v)) for v in videos]
    table, failed = sign(items, step_s=step_s, border_level=border_level, min_contrast=min_contrast)
    write_signatures(out, table)
    return {"clips": len(items) - len(failed), "failed": len(failed), "samples": int(len(table))}
