"""Wipes: a transition whose edge sweeps across the picture, the new shot on one side of it
and the old one on the other. TransNetV2 misses them (bench/bench_transitions.py: its
highest probability on a wipe 0.16), so ``scenes.detector: transnetv2 | both`` looks for
them here too.

Between two consecutive frames, a wipe changes the band of columns (or rows) that its edge
crossed, over most of the band's height, and little elsewhere. So, on small gray frames:
a column is *hit* at a frame step when at least ``FULL`` of its pixels change by more than
``TAU`` gray levels (steps where half the columns or more are hit at once are a cut or a
flash, not an edge, and are left out). A wipe is found when the columns hit for the first
time cover at least ``COVER`` of the width, their first hits span ``MIN_FRAMES`` to
``MAX_FRAMES`` frame steps in the order of the columns (Spearman's rank correlation of
column and step at least ``MONOTONE`` in size, either direction), and the picture after
the sweep differs from the one before it over at least ``COVER`` of the columns (a person
walking across a still background sweeps too, but leaves the background as it was). The
same runs on the rows for an edge that moves up or down.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import cv2
import numpy as np

from microg4m.common import media

SIZE = (80, 60)  # the small gray frames' width and height
TAU = 15.0  # gray levels (0-255) a pixel changes by to count as changed
FULL = 0.5  # share of a column's pixels changed for the column to be hit
COVER = 0.8  # share of the columns the sweep must cover (and change for good)
MIN_FRAMES, MAX_FRAMES = 3, 60  # frame steps the sweep lasts (0.1 to 2 s at 30 fps)
MONOTONE = 0.9  # |Spearman's rank correlation| of column and first hit


@dataclass(frozen=True)
class Wipe:
    """A wipe over 1-based frames ``first``..``last`` (the frames that differ from the one
    before them), its edge moving across the columns (``axis`` "x") or the rows ("y")."""

    first: int
    last: int
    axis: str


def small_gray(path: str | os.PathLike, size: tuple[int, int] = SIZE) -> np.ndarray:
    """Every frame of the video at ``path``, gray and scaled to ``size``, as float32 (n, h, w)."""
    frames = [cv2.resize(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), size, interpolation=cv2.INTER_AREA)
              for frame in media.iter_frames(path)]
    return np.asarray(frames, np.float32).reshape(-1, size[1], size[0])


def _ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(float)


def _sweep(frames: np.ndarray) -> tuple[int, int] | None:
    """The 0-based frame steps (first, last) of an edge sweeping across the columns of
    ``frames`` (n, h, w), or None."""
    if len(frames) < MIN_FRAMES + 1:
        return None
    changed = np.abs(np.diff(frames, axis=0)) > TAU  # (n-1, h, w)
    hit = changed.mean(axis=1) >= FULL  # (n-1, w)
    hit[hit.mean(axis=1) >= 0.5] = False  # a cut or a flash: every column at once
    columns = np.flatnonzero(hit.any(axis=0))
    width = frames.shape[2]
    if len(columns) < COVER * width:
        return None
    first = hit.argmax(axis=0)[columns]
    lo, hi = int(first.min()), int(first.max())
    if not MIN_FRAMES <= hi - lo + 1 <= MAX_FRAMES:
        return None
    a, b = _ranks(columns), _ranks(first)
    if a.std() == 0 or b.std() == 0 or abs(np.corrcoef(a, b)[0, 1]) < MONOTONE:
        return None
    after_vs_before = np.abs(frames[hi + 1] - frames[lo]) > TAU
    if (after_vs_before.mean(axis=0) >= FULL).mean() < COVER:
        return None
    return lo, hi


def find_wipes(frames: np.ndarray) -> list[Wipe]:
    """The wipes in small gray frames (n, h, w) (at most one an axis)."""
    found = []
    for axis, view in (("x", frames), ("y", np.transpose(frames, (0, 2, 1)))):
        sweep = _sweep(view)
        if sweep is not None:
            # step k is between 0-based frames k and k+1: 1-based frame k+2 is the first that differs
            found.append(Wipe(first=sweep[0] + 2, last=sweep[1] + 2, axis=axis))
    return found
