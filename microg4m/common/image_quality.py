"""Cheap per-frame picture scores: sharpness and exposure.

- ``sharpness``: the variance of the Laplacian of the gray frame (OpenCV, 3x3 kernel). It
  depends on the frame's size, so the quality stage measures every frame at one size
  (longer side ``quality.size``); a blurred or out-of-focus picture scores low.
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
    """Variance of the Laplacian of an 8-bit gray frame."""
    return float(cv2.Laplacian(gray, cv2.CV_64F, ksize=1).var())


def exposure(gray: np.ndarray) -> tuple[float, float]:
    """``(mean luma / 255, share of clipped pixels)`` of an 8-bit gray frame."""
    hist = np.bincount(gray.reshape(-1), minlength=256)
    n = gray.size
    mean = float(hist @ np.arange(256)) / n / 255
    clipped = float(hist[:CLIP_LOW + 1].sum() + hist[CLIP_HIGH:].sum()) / n
    return mean, clipped
