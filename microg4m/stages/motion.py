"""Motion level per clip: the reference's sparse optical flow score.

Shi-Tomasi corners on the first frame, pyramidal Lucas-Kanade over the first frames;
the points that were tracked become the points of the next step (they are never
re-detected). When no point is left (or the flow fails) the measurement stops there and
the pairs measured so far are averaged, as the reference does. Two scores:

- ``score`` (the reference): per frame pair the sum over the tracked points of
  ``|dx| + |dy|`` (the reference takes ``np.linalg.norm(..., axis=1)`` of an ``(n, 1, 2)``
  array, which is the absolute value of each coordinate), averaged over the pairs. It
  grows with the number of corners found (at most 100) and with the resolution.
- ``score_norm``: the mean Euclidean displacement per tracked point and frame pair,
  divided by the frame diagonal; independent of resolution and of the number of corners.

``level`` is ``high`` when the score chosen by ``method`` is above its threshold.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from microg4m.common import sparse_flow
from microg4m.common.progress import progress
from microg4m.formats import manifest as mf
from microg4m.common.atomic import write_tsv
from microg4m.common.media import MediaError, iter_frames
from microg4m.formats.motion import COLUMNS

# The flow runs with the reference's parameters (sparse_flow.FEATURE_PARAMS, LK_PARAMS).
METHODS = ("reference", "normalized")


@dataclass(frozen=True)
class Motion:
    score: float  # reference: mean over measured frame pairs of sum(|dx| + |dy|) (px)
    score_norm: float  # mean Euclidean displacement per tracked point / frame diagonal
    pairs: int  # frame pairs measured (fewer than frames - 1 when the points were lost)
    points: int  # corners found on the first frame


def flow_scores(frames: Iterable[np.ndarray]) -> Motion:
    """Both motion scores of a sequence of BGR (or gray) frames."""
    it = iter(frames)
    first = next(it, None)
    if first is None:
        raise ValueError("no frames to measure motion on")
    head = sparse_flow.gray(first)
    h, w = head.shape[:2]
    p0 = sparse_flow.corners(head)
    n_points = 0 if p0 is None else len(p0)
    # The reference's sums are float32 (numpy keeps its float32 scalars): so are these.
    pairs, total, euclid, moved_points = 0, np.float32(0), 0.0, 0
    for before, after in sparse_flow.tracked_points(itertools.chain([head], it), first=p0):
        d = after - before
        total = np.float32(total + np.abs(d).sum(dtype=np.float32))
        euclid += float(np.linalg.norm(d, axis=1).sum())
        moved_points += len(d)
        pairs += 1
    score = float(total / np.float32(pairs)) if pairs else 0.0
    per_point = euclid / moved_points if moved_points else 0.0
    return Motion(score, per_point / math.hypot(w, h), pairs, n_points)


def level(m: Motion, *, method: str = "reference", high_threshold: float = 95.0,
          normalized_high_threshold: float = 0.01) -> str:
    """``high`` or ``low`` according to the chosen score and its threshold."""
    if method == "reference":
        return "high" if m.score > high_threshold else "low"
    if method == "normalized":
        return "high" if m.score_norm > normalized_high_threshold else "low"
    raise ValueError(f"motion method must be one of {METHODS}, got {method!r}")


def clip_motion(path: str | os.PathLike, frames: int = 30) -> Motion:
    """Motion scores of the first ``frames`` frames of a video file."""
    if frames < 2:
        raise ValueError(f"motion needs at least 2 frames, got frames={frames}")
    try:
        return flow_scores(iter_frames(path, limit=frames))
    except ValueError:
        raise MediaError(f"{path}: no decodable frames") from None


def run(manifest: str | os.PathLike, out: str | os.PathLike, *, method: str = "reference",
        frames: int = 30, high_threshold: float = 95.0,
        normalized_high_threshold: float = 0.01) -> pd.DataFrame:
    """Score every ok clip of a unit's manifest; write ``motion/{unit}.tsv`` (``out``)."""
    if method not in METHODS:
        raise ValueError(f"motion method must be one of {METHODS}, got {method!r}")
    rows = []
    for clip in progress(mf.ok_clips(manifest)["clip_id"], "motion"):
        m = clip_motion(mf.clip_file(manifest, clip), frames)
        lv = level(m, method=method, high_threshold=high_threshold,
                   normalized_high_threshold=normalized_high_threshold)
        rows.append({"clip_id": clip, "score": f"{m.score:.3f}",
                     "score_norm": f"{m.score_norm:.6f}", "level": lv})
    df = pd.DataFrame(rows, columns=COLUMNS)
    write_tsv(out, df)
    return df
