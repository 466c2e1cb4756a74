"""Frame n of a clip as a JPEG, decoded with OpenCV (exact frame stepping in the page).

The JPEGs of the last few clips are kept in memory; a clip is decoded once, when the
page asks for its first frame.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import cv2

from microg4m.common.media import MediaError, iter_frames
from .errors import Refused

JPEG_QUALITY = 85
CACHED_CLIPS = 6


class FrameCache:
    def __init__(self, size: int = CACHED_CLIPS):
        self.size = size
        self._clips: OrderedDict[tuple, list[bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def frame(self, path: Path, n: int) -> bytes:
        """JPEG bytes of frame ``n`` (1-based) of the clip at ``path``."""
        frames = self._decoded(path)
        if not 1 <= n <= len(frames):
            raise Refused(404, f"frame {n} out of range: {path.stem} has {len(frames)} frames")
        return frames[n - 1]

    def _decoded(self, path: Path) -> list[bytes]:
        try:
            key = (str(path), path.stat().st_mtime_ns)
        except OSError:
            raise Refused(404, f"clip file {path.name} not found") from None
        with self._lock:  # one decode per clip, other requests wait for it
            if key in self._clips:
                self._clips.move_to_end(key)
                return self._clips[key]
            frames = []
            try:
                for img in iter_frames(path):
                    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
                    if not ok:
                        raise Refused(500, f"{path.name}: JPEG encoding failed")
                    frames.append(buf.tobytes())
            except MediaError as exc:
                raise Refused(500, str(exc)) from None
            if not frames:
                raise Refused(500, f"{path.name}: no decodable frames")
            self._clips[key] = frames
            while len(self._clips) > self.size:
                self._clips.popitem(last=False)
            return frames
