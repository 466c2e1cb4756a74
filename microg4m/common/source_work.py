"""A source's work before its jobs run: what ``sources_per_job: auto`` packs units by
(microg4m/common/units.py).

The work is the frames its clips will hold (duration x ``trim.fps``), each weighted by the
pixels the detector runs on: the frame scaled to fit ``detect.imgsz`` and each side padded
to a multiple of 32, as the detector letterboxes it, over ``imgsz``²
(a 640x360 source counts 0.6 a frame at 640, a square one 1.0). Known while the DAG is
built for a local file (OpenCV reads its container's header, a few ms a file) and, for a
source already in the plan, from its finished download (its record in ``download/videos``
holds duration and size); otherwise unknown (None), and the planner counts the median of
the known ones. A source new to the plan is estimated only from what the run does not make
(not its download, not a demo video), so that a run killed before it wrote its plan plans
the same units when started again.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from microg4m.formats.sources import normalize_url

STRIDE = 32


class Shape(NamedTuple):
    seconds: float
    width: int
    height: int


def shape_of_file(path: str | os.PathLike) -> Shape | None:
    """Duration and frame size of the video at ``path`` from its container, or None."""
    import cv2  # here: the DAG imports this module for every run, cv2 only when a file is read

    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            return None
        count, fps = cap.get(cv2.CAP_PROP_FRAME_COUNT), cap.get(cv2.CAP_PROP_FPS)
        width, height = cap.get(cv2.CAP_PROP_FRAME_WIDTH), cap.get(cv2.CAP_PROP_FRAME_HEIGHT)
    finally:
        cap.release()
    if count <= 0 or fps <= 0 or width <= 0 or height <= 0:
        return None
    return Shape(count / fps, int(width), int(height))


def recorded_shape(video_dir: Path, source_id: str, url: str) -> Shape | None:
    """Duration and size a finished download of ``url`` recorded (download stage), or None."""
    try:
        saved = json.loads((video_dir / f"{source_id}.record.json").read_text(encoding="utf-8"))
        record = saved["record"]
        if record.get("url") != url or record.get("status") != "ok":
            return None
        shape = Shape(float(record.get("duration") or 0), int(record.get("width") or 0),
                      int(record.get("height") or 0))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return shape if min(shape) > 0 else None


def frame_weight(width: int, height: int, imgsz: int, max_height: int | None = None) -> float:
    """The share of ``imgsz``² a frame of the clip cut from a ``width`` x ``height`` source
    takes as the detector's input (scaled to fit ``imgsz``, sides padded to the stride)."""
    if max_height and height > max_height:
        width, height = width * max_height / height, max_height
    r = imgsz / max(width, height)
    padded = [math.ceil(round(side * r) / STRIDE) * STRIDE for side in (width, height)]
    return padded[0] * padded[1] / imgsz**2


def estimate(sources, ids: Iterable[str], results: str | os.PathLike, *, fps: float, imgsz: int,
             max_height: int | None = None, downloads: bool = True,
             made_here: Callable[[Path], bool] | None = None) -> dict[str, float | None]:
    """Source id -> estimated work (None: not known yet) for ``ids`` of the sources table
    ``sources`` (indexed by source id, with a ``url`` column). ``downloads``: read finished
    downloads' records; ``made_here``: local files the workflow makes itself, not read
    (what a run makes must not change the plan it runs, or a run killed before its plan was
    written would plan otherwise when started again)."""
    video_dir = Path(results) / "download" / "videos"
    out: dict[str, float | None] = {}
    for sid in ids:
        url = sources.loc[sid, "url"]
        shape = recorded_shape(video_dir, sid, url) if downloads else None
        if shape is None:
            _, local = normalize_url(url)
            if local is not None and local.is_file() and not (made_here and made_here(local)):
                shape = shape_of_file(local)
        out[sid] = None if shape is None else round(
            shape.seconds * fps * frame_weight(shape.width, shape.height, imgsz, max_height), 1)
    return out
