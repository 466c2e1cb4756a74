"""Frame n of a clip as a JPEG, for exact frame stepping in the page.

Where the export's JPEG frames of the clip exist (``results/frames/<clip>/<clip>_%06d.jpg``,
written by the frames stage) and are newer than the clip file, frame n is that file's
bytes: nothing is decoded. Otherwise the clip is decoded with OpenCV and each frame
JPEG-encoded, once per version of the clip file (its path, inode, time and size: a
re-run that rewrites the clip is decoded again, never served stale). The JPEGs are kept
in memory, the least recently used clip evicted first, ``max_bytes`` in all
(``annotate.frame_cache_mb``).

A decode runs in a thread of its own (at most :data:`DECODERS` at once); one lock guards
the bookkeeping only and is never held while decoding. Every request for a clip being
decoded waits on that one decode and is answered as soon as its frame is decoded: two
annotators opening the same clip cause one decode, and different clips decode at once.

Each frame has an entity tag (:meth:`FrameCache.lookup`) made from stamps only: the
export's file's (inode, time, size), or the clip file's with the frame number and the JPEG
quality. A browser that has the frame sends it back (``If-None-Match``) and is answered
304 without a read or a decode.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import cv2

from microg4m.common.media import MediaError, iter_frames
from .errors import Refused

JPEG_QUALITY = 85
DECODERS = max(2, os.cpu_count() or 2)  # decodes running at once (more wait for a slot)
WAIT_SECONDS = 120  # a request waits at most this long for its frame


def default_max_bytes() -> int:
    """The schema's default of ``annotate.frame_cache_mb``, in bytes."""
    from microg4m import config

    return int(config.defaults()["annotate"]["frame_cache_mb"]) << 20


def decode_jpegs(path: Path) -> Iterator[bytes]:
    """The clip's frames, decoded in order, each as JPEG bytes (quality :data:`JPEG_QUALITY`)."""
    for img in iter_frames(path):
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise MediaError(f"{path.name}: JPEG encoding failed")
        yield buf.tobytes()


@dataclass(frozen=True)
class Frame:
    """A frame found but not read yet: its entity tag, and ``read()`` for its JPEG bytes."""

    etag: str
    read: Callable[[], bytes]


def _tag(kind: str, st: os.stat_result, *more) -> str:
    return "-".join([kind + format(st.st_ino, "x"), format(st.st_mtime_ns, "x"), format(st.st_size, "x"),
                     *map(str, more)])


class _Decode:
    """The frames of one version of a clip file, filled in order by one decoder."""

    def __init__(self):
        self.frames: list[bytes] = []
        self.nbytes = 0
        self.done = False
        self.error = ""
        self.changed = threading.Condition()

    def wait(self, n: int, name: str) -> bytes:
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.frames) >= n or self.done, WAIT_SECONDS):
                raise Refused(503, f"{name}: frame {n} not decoded within {WAIT_SECONDS} s; try again")
            if len(self.frames) >= n:
                return self.frames[n - 1]
            if self.error:
                raise Refused(500, self.error)
            raise Refused(404, f"frame {n} out of range: {Path(name).stem} has {len(self.frames)} frames")


class FrameCache:
    """JPEG frames of clips: the export's files, else decoded once and kept (LRU, ``max_bytes``)."""

    def __init__(self, max_bytes: int | None = None, decode: Callable[[Path], Iterator[bytes]] = decode_jpegs):
        self.max_bytes = default_max_bytes() if max_bytes is None else int(max_bytes)
        if self.max_bytes < 1:
            raise ValueError(f"frame cache of {self.max_bytes} bytes: must be at least 1")
        self.decode = decode  # path -> JPEG bytes per frame (tests count its calls)
        self._lock = threading.Lock()  # the bookkeeping below; never held while decoding
        self._kept: OrderedDict[tuple, _Decode] = OrderedDict()  # finished decodes, least recent first
        self._running: dict[tuple, _Decode] = {}
        self._bytes = 0  # JPEG bytes of the kept and the running decodes
        self._slots = threading.BoundedSemaphore(DECODERS)

    @property
    def nbytes(self) -> int:
        """JPEG bytes held now (kept clips and decodes in progress)."""
        with self._lock:
            return self._bytes

    def kept(self) -> list[str]:
        """Paths of the clips whose frames are kept, least recently used first."""
        with self._lock:
            return [key[0] for key in self._kept]

    def frame(self, path: Path, n: int, jpeg: Path | None = None) -> bytes:
        """JPEG bytes of frame ``n`` (1-based) of the clip at ``path``; ``jpeg``: where the
        export's file of that frame would be (used when it exists and is newer than the clip)."""
        return self.lookup(path, n, jpeg).read()

    def lookup(self, path: Path, n: int, jpeg: Path | None = None) -> Frame:
        """Frame ``n`` as :meth:`frame` finds it, with its entity tag: stats only, nothing
        read or decoded until ``read()``."""
        if n < 1:
            raise Refused(404, f"frame {n} out of range: {path.stem} starts at frame 1")
        try:
            st = path.stat()
        except OSError:
            raise Refused(404, f"clip file {path.name} not found") from None
        if jpeg is not None:
            found = _exported(jpeg, st.st_mtime_ns)
            if found is not None:
                return found
        key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
        return Frame(_tag("d", st, n, f"q{JPEG_QUALITY}"), lambda: self._entry(key, path).wait(n, path.name))

    def _entry(self, key: tuple, path: Path) -> _Decode:
        with self._lock:
            entry = self._kept.get(key)
            if entry is not None:
                self._kept.move_to_end(key)
                return entry
            entry = self._running.get(key)
            if entry is None:  # the first request for this version of the clip starts its decode
                entry = self._running[key] = _Decode()
                threading.Thread(target=self._run, args=(key, path, entry), name=f"decode {path.name}",
                                 daemon=True).start()
            return entry

    def _run(self, key: tuple, path: Path, entry: _Decode) -> None:
        with self._slots:
            try:
                for data in self.decode(path):
                    with self._lock:
                        self._bytes += len(data)
                        self._evict()
                    with entry.changed:
                        entry.frames.append(data)
                        entry.nbytes += len(data)
                        entry.changed.notify_all()
                if not entry.frames:
                    entry.error = f"{path.name}: no decodable frames"
            except Exception as exc:  # any failure is answered as an error, and nothing is kept
                entry.error = f"{path.name}: cannot be decoded ({type(exc).__name__}: {exc})"
            finally:
                with self._lock:
                    del self._running[key]
                    if entry.error:
                        self._bytes -= entry.nbytes
                    else:
                        self._kept[key] = entry
                        self._evict()
                with entry.changed:
                    entry.done = True
                    entry.changed.notify_all()

    def _evict(self) -> None:
        """Drop the least recently used finished clips until the bytes fit (under the lock)."""
        while self._bytes > self.max_bytes and self._kept:
            _, old = self._kept.popitem(last=False)
            self._bytes -= old.nbytes


def _exported(jpeg: Path, clip_mtime_ns: int) -> Frame | None:
    """The export's JPEG, or None when its clip folder is missing, not newer than the clip
    file (the clip was made again after the frames: they may be stale) or lacks the frame."""
    try:
        if jpeg.parent.stat().st_mtime_ns <= clip_mtime_ns:
            return None
        st = jpeg.stat()
    except OSError:
        return None

    def read() -> bytes:
        try:
            return jpeg.read_bytes()
        except OSError as exc:  # gone between the stat and the read (a re-run of the frames stage)
            raise Refused(503, f"{jpeg.name}: {exc.strerror}; try again") from None

    return Frame(_tag("x", st), read)
