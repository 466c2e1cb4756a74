"""Burnt-in text: the PP-OCRv4 text detection network that ships inside the pinned PyPI
package ``rapidocr_onnxruntime`` (Apache-2.0, the models inside its wheel), run with
ONNX Runtime on the CPU. Only detection runs (no recognition): the quality stage needs
where text is, not what it says.

A frame is scaled down so that its longer side is ``size`` pixels (never up; the network
wants sides that are multiples of 32, which the package's own pre-processing rounds to),
the package's DB post-processing gives the text boxes, and the text area is the share of
the frame that the boxes cover (their union, drawn into a mask of the scaled frame).
"""

from __future__ import annotations

import functools
from pathlib import Path

import cv2
import numpy as np

PACKAGE = "rapidocr_onnxruntime"
MODEL = "models/ch_PP-OCRv4_det_infer.onnx"
# The package's own detection settings (its config.yaml), but for the size of the input.
SETTINGS = dict(thresh=0.3, box_thresh=0.5, max_candidates=1000, unclip_ratio=1.6, use_dilation=True,
                score_mode="fast", mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5])


def version() -> str:
    """The installed package's version (a clear message when it is missing)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(PACKAGE)
    except PackageNotFoundError:
        raise RuntimeError(f"the quality stage's text score needs the package {PACKAGE} "
                           f"(pip install {PACKAGE})") from None


@functools.lru_cache(maxsize=4)
def detector(size: int, threads: int = 1):
    """The package's text detector for inputs of longer side ``size``, on ``threads`` CPU threads."""
    version()
    import rapidocr_onnxruntime
    from rapidocr_onnxruntime.ch_ppocr_det import TextDetector

    model = Path(rapidocr_onnxruntime.__file__).parent / MODEL
    if not model.is_file():
        raise RuntimeError(f"{model}: the text detection model is missing from the package {PACKAGE}")
    return TextDetector(dict(SETTINGS, model_path=str(model), limit_side_len=int(size), limit_type="max",
                             intra_op_num_threads=int(threads), inter_op_num_threads=1,
                             use_cuda=False, use_dml=False))


def scaled(frame: np.ndarray, size: int) -> np.ndarray:
    """``frame`` with its longer side ``size`` pixels (never scaled up)."""
    h, w = frame.shape[:2]
    k = size / max(h, w)
    if k >= 1:
        return frame
    return cv2.resize(frame, (max(1, round(w * k)), max(1, round(h * k))), interpolation=cv2.INTER_AREA)


def text_boxes(frame: np.ndarray, size: int = 320, threads: int = 1) -> tuple[np.ndarray, tuple[int, int]]:
    """The text boxes of a BGR frame as quadrilaterals ``(n, 4, 2)`` in the pixels of the
    frame scaled to ``size``, and that scaled frame's ``(height, width)``."""
    small = scaled(frame, size)
    boxes, _ = detector(size, threads)(small)
    boxes = np.zeros((0, 4, 2), np.float32) if boxes is None or len(boxes) == 0 else np.asarray(boxes, np.float32)
    return boxes, small.shape[:2]


def text_area(frame: np.ndarray, size: int = 320, threads: int = 1) -> float:
    """The share of a BGR frame covered by text (0-1)."""
    boxes, (h, w) = text_boxes(frame, size, threads)
    if not len(boxes):
        return 0.0
    mask = np.zeros((h, w), np.uint8)
    cv2.fillPoly(mask, [np.round(b).astype(np.int32) for b in boxes], 1)
    return float(mask.mean())
