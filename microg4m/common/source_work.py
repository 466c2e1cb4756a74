"""A source's work before its jobs run: the frames its clips will hold (duration x fps).

What ``sources_per_job: auto`` packs units by (microg4m/common/units.py). Known while the
DAG is built for a source whose download finished (its record in ``download/videos``
holds the duration) and for a local file (its container says how many frames it holds at
what rate: OpenCV reads the header, a few ms a file); otherwise unknown (None), and the
planner counts the median of the known ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from microg4m.formats.sources import normalize_url


def duration_of_file(path: str | os.PathLike) -> float | None:
    """Seconds of the video at ``path`` from its container's frame count and rate, or None."""
    import cv2  # here: the DAG imports this module for every run, cv2 only when a file is read

    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            return None
        count, fps = cap.get(cv2.CAP_PROP_FRAME_COUNT), cap.get(cv2.CAP_PROP_FPS)
    finally:
        cap.release()
    return count / fps if count > 0 and fps > 0 else None


def recorded_duration(video_dir: Path, source_id: str, url: str) -> float | None:
    """The duration a finished download of ``url`` recorded (download stage), or None."""
    try:
        saved = json.loads((video_dir / f"{source_id}.record.json").read_text(encoding="utf-8"))
        record = saved["record"]
        if record.get("url") != url or record.get("status") != "ok":
            return None
        duration = float(record.get("duration") or 0)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return duration if duration > 0 else None


def estimate(sources, ids: Iterable[str], results: str | os.PathLike, fps: float) -> dict[str, float | None]:
    """Source id -> estimated frames at ``fps`` (None: not known yet) for ``ids`` of the
    sources table ``sources`` (indexed by source id, with a ``url`` column)."""
    video_dir = Path(results) / "download" / "videos"
    out: dict[str, float | None] = {}
    for sid in ids:
        url = sources.loc[sid, "url"]
        seconds = recorded_duration(video_dir, sid, url)
        if seconds is None:
            _, local = normalize_url(url)
            if local is not None and local.is_file():
                seconds = duration_of_file(local)
        out[sid] = None if seconds is None else round(seconds * fps, 1)
    return out
