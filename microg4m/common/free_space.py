"""Free space before a job writes: a run on a nearly full disk stops at once, with the
numbers, instead of after hours of work (docs/robustness.md).

Each estimate is of what the job is about to write, from what is known before it writes:

* download: a source's size as yt-dlp announces it (``filesize`` or ``filesize_approx`` of the
  formats it picked) times :data:`DOWNLOAD_FACTOR` (the video and audio parts lie beside
  the merged file until the merge ends); a local film: its size where it is copied, 0 where
  it is hard-linked (the same filesystem);
* trim: the clips of every downloaded source of the unit, its duration x 30 fps x its
  (capped, even) frame size x :data:`CLIP_BYTES_PER_PIXEL`;
* frames: the JPEGs of every kept clip, 90 x its frame size x :data:`JPEG_BYTES_PER_PIXEL`.

plus :data:`HEADROOM` for the tables, logs and caches beside them. The per-pixel figures are
at the top of what ``bench/bench_free_space.py`` measured on the package footage (x264 CRF 23
``veryfast``: 0.004-0.014 bytes a pixel; JPEG ``-q:v 2``: 0.035-0.25), not the worst case, so
the check stops a job that cannot fit rather than one that might not (a job it lets start
and that then fills the disk fails as any other fault of the machine).

Too little space is a :class:`~microg4m.common.faults.MachineFault` (ENOSPC), raised before
the job writes anything. The config's ``check_free_space: false`` turns the checks off.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
from pathlib import Path

from microg4m.common.faults import MachineFault

CLIP_BYTES_PER_PIXEL = 0.015  # an H.264 clip's bytes per pixel of each frame (x264 CRF 23 veryfast)
JPEG_BYTES_PER_PIXEL = 0.15  # a -q:v 2 JPEG frame's bytes per pixel
DOWNLOAD_FACTOR = 2.0  # the parts and the merged file at once
HEADROOM = 16 * 2**20  # bytes for the tables, logs and caches a job writes beside its media


def human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _existing(folder: str | os.PathLike) -> Path:
    """``folder``, or the nearest folder above it that exists."""
    path = Path(folder).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(folder: str | os.PathLike) -> int:
    """The bytes this account may still write on the filesystem of ``folder``."""
    return shutil.disk_usage(_existing(folder)).free


def require(folder: str | os.PathLike, need: float, what: str) -> None:
    """Raise MachineFault (ENOSPC) unless the filesystem of ``folder`` has ``need`` bytes
    and :data:`HEADROOM` free; ``what``: what needs them, for the message."""
    if need <= 0:
        return
    free = free_bytes(folder)
    if free < need + HEADROOM:
        raise MachineFault(folder, f"not enough free space for {what}: it will write about {human(need)} "
                           f"(and {human(HEADROOM)} of headroom), {human(free)} are free (the check before the job "
                           "writes; check_free_space: false turns it off)", errno=errno.ENOSPC)


def frame_pixels(width: float, height: float, max_height: int | None = None) -> float:
    """Pixels of a clip's frame cut from a ``width`` x ``height`` source (trim.max_height)."""
    if max_height and height > max_height:
        width, height = width * max_height / height, max_height
    return 2 * math.floor(width / 2) * 2 * math.floor(height / 2)


def clips_bytes(records, *, fps: float = 30, max_height: int | None = None) -> float:
    """What trim writes for the download ``records`` (dicts with status, duration, width, height)."""
    total = 0.0
    for r in records:
        try:
            seconds, width, height = float(r["duration"] or 0), float(r["width"] or 0), float(r["height"] or 0)
        except (KeyError, TypeError, ValueError):
            continue  # unknown: trim itself finds out
        if r.get("status") == "ok":
            total += seconds * fps * frame_pixels(width, height, max_height) * CLIP_BYTES_PER_PIXEL
    return total


def frames_bytes(clips) -> float:
    """What the frames stage writes for ``clips`` (rows with frames, width, height)."""
    return sum(float(c.frames) * float(c.width) * float(c.height) * JPEG_BYTES_PER_PIXEL for c in clips)


def copy_bytes(source: Path, folder: Path) -> int:
    """What linking ``source`` into ``folder`` writes: nothing on the same filesystem (a
    hard link), else a copy of it."""
    try:
        if source.stat().st_dev == _existing(folder).stat().st_dev:
            return 0
        return source.stat().st_size
    except OSError:
        return 0  # the link itself says what is wrong


def announced_bytes(info: dict) -> float | None:
    """The size of a download as yt-dlp announces it for the formats it picked (None: unknown)."""
    parts = info.get("requested_formats") or [info]
    sizes = [p.get("filesize") or p.get("filesize_approx") for p in parts]
    return None if not sizes or None in sizes else float(sum(sizes))
