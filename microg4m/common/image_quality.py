"""Cheap per-frame picture scores: sharpness and exposure.

- ``sharpness``: the variance of the Laplacian of the gray frame (OpenCV, 3x3 kernel)
  divided by the variance of the frame's gray levels: the Laplacian's share of the
  picture's contrast, so that a sharp picture of little contrast (a dark stage, a flat
  backdrop) is not taken for a blurred one. On bench/bench_quality.py's footage the plain
  variance of the Laplacian overlapped (Gaussian-blurred pictures 2-21, a sharp dancer on a
  blue backdrop 18); this ratio did not (blurred at most 0.007, sharp at least 0.07). It
  depends on the frame's size, so the quality stage measures every frame at one size
  (longer side ``quality.size``). A flat frame (no contrast) scores 0.
- ``exposure``: the mean luma (gray level) as a share of 255: dark pictures near 0,
  washed-out ones near 1;
- ``clipped``: the share of pixels at the ends of the range (gray ≤ 5 or ≥ 250), crushed
  blacks and blown highlights.
"""

from __future__ import annotations

import cv2
import numpy as np

CLIP_LOW, CLIP_HIGH = 5, 250


def sharpness(gray: np.ndarray) -> float:
    """Variance of the Laplacian over the variance of the gray levels, of an 8-bit gray frame."""
    contrast = float(gray.var())
    if contrast < 1.0:  # flat: nothing to be sharp (and a ratio of noise)
        return 0.0
    return float(cv2.Laplacian(gray, cv2.CV_64F, ksize=1).var()) / contrast


def exposure(gray: np.ndarray) -> tuple[float, float]:
    """``(mean luma / 255, share of clipped pixels)`` of an 8-bit gray frame."""
    hist = np.bincount(gray.reshape(-1), minlength=256)
    n = gray.size
    mean = float(hist @ np.arange(256)) / n / 255
    clipped = float(hist[:CLIP_LOW + 1].sum() + hist[CLIP_HIGH:].sum()) / n
    return mean, clipped
