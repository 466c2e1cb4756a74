"""Sparse optical flow over a sequence of frames, shared by the motion stage (the
reference's motion level) and the quality stage (camera motion).

Shi-Tomasi corners on the first frame, pyramidal Lucas-Kanade from each frame to the
next; the points that were tracked become the points of the next step. With
``redetect`` the corners are found again on every frame instead (the quality stage's
camera motion: points that left the frame are replaced). The reference never re-detects;
when no point is left, or the flow fails, the sequence stops there.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import cv2
import numpy as np

# The reference's parameters (OpenCV's optical flow tutorial values).
FEATURE_PARAMS = dict(maxCorners=100, qualityLevel=0.3, minDistance=7, blockSize=7)
LK_PARAMS = dict(
    winSize=(15, 15), maxLevel=2,
    criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 10, 0.03),
)


def gray(frame: np.ndarray) -> np.ndarray:
    """A BGR frame as 8-bit gray (a gray frame as it is)."""
    return frame if frame.ndim == 2 else cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)


def corners(frame: np.ndarray, feature_params: dict | None = None) -> np.ndarray | None:
    """Shi-Tomasi corners of a gray frame, ``(n, 1, 2)`` float32, or None when there are none."""
    return cv2.goodFeaturesToTrack(frame, mask=None, **(feature_params or FEATURE_PARAMS))


def tracked_points(frames: Iterable[np.ndarray], *, feature_params: dict | None = None,
                   lk_params: dict | None = None, redetect: bool = False,
                   first: np.ndarray | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per pair of consecutive frames, the points tracked: ``(before, after)``, two ``(n, 2)``
    float32 arrays (n ≥ 1). Stops early as described in the module's docstring.

    ``frames``: BGR or gray frames (all of one size); ``first``: the corners of the first
    frame when the caller already has them (default: found here).
    """
    lk = lk_params or LK_PARAMS
    it = iter(frames)
    head = next(it, None)
    if head is None:
        return
    prev = gray(head)
    p0 = first if first is not None else corners(prev, feature_params)
    for frame in it:
        cur = gray(frame)
        if p0 is None:
            if not redetect:
                return
            prev, p0 = cur, corners(cur, feature_params)
            continue
        p1, st, _err = cv2.calcOpticalFlowPyrLK(prev, cur, p0, None, **lk)
        if p1 is None or st is None:
            return
        good = st.reshape(-1) == 1
        if not good.any():
            if not redetect:
                return  # every point lost
        else:
            yield p0.reshape(-1, 2)[good], p1.reshape(-1, 2)[good]
        p0 = corners(cur, feature_params) if redetect else p1.reshape(-1, 2)[good].reshape(-1, 1, 2)
        prev = cur
