"""Camera motion of a clip from sparse optical flow: its class (``static``, ``pan``,
``tilt``, ``zoom``, ``shake``) and its magnitude.

Per pair of frames (``gap`` frames apart) the points tracked by microg4m.common.sparse_flow
are fitted with a similarity transform (translation, rotation, uniform scale; OpenCV's
``estimateAffinePartial2D`` with RANSAC, so that people moving in front of a still camera
are outliers). Its motion is measured in shares of the frame diagonal per frame:

- ``pan``: the horizontal shift of the frame's centre, ``tilt``: the vertical one;
- ``zoom``: the scale change, as the shift it gives a corner (half the diagonal away);
- ``magnitude``: the mean shift of the frame's four corners.

The clip's magnitude is the mean over the pairs. Below ``static`` it is ``static``. When
the pairs' motions do not agree in direction (the length of their mean vector is below
``shake`` times their mean length) it is ``shake``; else the largest of the mean pan,
tilt and zoom names it. A clip without trackable points (a flat or black picture) is
``unknown`` with magnitude 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import cv2
import numpy as np

from microg4m.common import sparse_flow

CLASSES = ("static", "pan", "tilt", "zoom", "shake", "unknown")
# Corners re-detected on every frame (points that left the frame are replaced; a lower
# quality level than the reference's, so that low-contrast pictures keep some) and a deeper
# pyramid for the larger steps between sampled frames. 200 corners and a 21x21 window got
# as many of the bench clips right (43 of 45; the same two dancer clips wrong, one of them
# as another wrong class) at 2.3 CPU-ms a frame against 1.7 (bench/bench_quality.py).
FEATURE_PARAMS = dict(maxCorners=100, qualityLevel=0.01, minDistance=8, blockSize=7)
LK_PARAMS = dict(winSize=(15, 15), maxLevel=3,
                 criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 10, 0.03))
MIN_POINTS = 8  # a pair with fewer tracked points is not measured


@dataclass(frozen=True)
class Camera:
    kind: str  # one of CLASSES
    magnitude: float  # mean corner shift, share of the frame diagonal per frame
    pan: float  # mean horizontal shift of the centre (+: content moves left, camera pans right)
    tilt: float  # mean vertical shift of the centre (+: camera tilts down)
    zoom: float  # mean scale change as a corner's shift (+: zoom in)
    pairs: int  # frame pairs measured


def pair_motion(before: np.ndarray, after: np.ndarray, width: int, height: int,
                gap: int = 1) -> tuple[float, float, float, float] | None:
    """``(pan, tilt, zoom, magnitude)`` per frame between two frames from their tracked
    points (``(n, 2)`` each), or None when they do not fit a transform."""
    if len(before) < MIN_POINTS:
        return None
    m, _inliers = cv2.estimateAffinePartial2D(before, after, method=cv2.RANSAC, ransacReprojThreshold=1.0,
                                              maxIters=500, confidence=0.99, refineIters=10)
    if m is None:
        return None
    diag = math.hypot(width, height) * gap
    centre = np.array([width / 2, height / 2, 1.0])
    shift = m @ centre - centre[:2]
    scale = math.hypot(m[0, 0], m[1, 0])
    corners = np.array([[0, 0, 1], [width, 0, 1], [0, height, 1], [width, height, 1]], float)
    moved = corners @ m.T - corners[:, :2]
    # the content moves against the camera: a pan right shifts the picture left
    return (float(-shift[0] / diag), float(-shift[1] / diag), float((scale - 1) / 2 / gap),
            float(np.linalg.norm(moved, axis=1).mean() / diag))


def classify(motions: list[tuple[float, float, float, float]], *, static: float = 0.001,
             shake: float = 0.5) -> Camera:
    """The clip's camera from its pairs' ``pair_motion`` (see the module's docstring)."""
    if not motions:
        return Camera("unknown", 0.0, 0.0, 0.0, 0.0, 0)
    a = np.asarray(motions, float)
    pan, tilt, zoom, magnitude = (float(x) for x in a.mean(axis=0))
    if magnitude < static:
        kind = "static"
    elif math.hypot(pan, tilt, zoom) < shake * float(np.linalg.norm(a[:, :3], axis=1).mean()):
        kind = "shake"
    else:
        kind = ("pan", "tilt", "zoom")[int(np.argmax([abs(pan), abs(tilt), abs(zoom)]))]
    return Camera(kind, magnitude, pan, tilt, zoom, len(a))


def camera_motion(frames: Iterable[np.ndarray], *, gap: int = 1, static: float = 0.001,
                  shake: float = 0.5) -> Camera:
    """The camera of a sequence of gray (or BGR) frames of one size, ``gap`` frames apart."""
    frames = [sparse_flow.gray(f) for f in frames]
    if not frames:
        return classify([])
    h, w = frames[0].shape[:2]
    motions = []
    for before, after in sparse_flow.tracked_points(frames, feature_params=FEATURE_PARAMS, lk_params=LK_PARAMS,
                                                    redetect=True):
        m = pair_motion(before, after, w, h, gap)
        if m is not None:
            motions.append(m)
    return classify(motions, static=static, shake=shake)
