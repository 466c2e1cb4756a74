"""Video helpers shared by the stages: the ffmpeg binary, probing and frame decoding.

One ffmpeg everywhere: the static binary that the pinned ``imageio-ffmpeg`` ships, so
that the same inputs give the same clips (bytes and frame counts) on every machine,
whatever else is installed. Another binary (a system ffmpeg with NVENC, say) is chosen
with the config key ``ffmpeg`` or the CLI option ``--ffmpeg`` (``use_ffmpeg``). Probing
reads ffmpeg's own stream header; frame counts come from decoding (OpenCV), never from
container metadata.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import cv2
import numpy as np

from microg4m.common import faults
from microg4m.common.atomic import atomic_path


class MediaError(RuntimeError):
    """A video that cannot be opened or decoded; the message names the file and why."""


_CHOSEN: str | None = None  # set by use_ffmpeg; None = imageio-ffmpeg's pinned binary


def use_ffmpeg(binary: str | os.PathLike | None) -> str:
    """Choose the ffmpeg binary for this process (None or "" = the pinned default).

    A bare name is looked up on PATH. Raises MediaError naming the setting when the
    binary is missing or does not run. Returns the binary's path.
    """
    global _CHOSEN
    if binary in (None, ""):
        _CHOSEN = None
        return ffmpeg_exe()
    found = shutil.which(str(binary))
    if found is None:
        raise MediaError(f"ffmpeg = {str(binary)!r}: no such executable")
    ffmpeg_version(found)  # fails here, naming the setting, if the binary does not run
    _CHOSEN = found
    return found


def ffmpeg_exe() -> str:
    """The ffmpeg binary in use (see use_ffmpeg)."""
    if _CHOSEN is not None:
        return _CHOSEN
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


def ffmpeg_version(exe: str | None = None) -> str:
    """The first line of ``ffmpeg -version`` of the binary in use (or of ``exe``)."""
    return _version(exe or ffmpeg_exe())


@functools.cache
def _version(exe: str) -> str:
    try:
        proc = subprocess.run([exe, "-hide_banner", "-version"], capture_output=True, text=True,
                              errors="replace", timeout=30)
    except OSError as exc:
        raise MediaError(f"ffmpeg = {exe!r}: cannot run it ({exc})") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise MediaError(f"ffmpeg = {exe!r}: `-version` failed (exit code {proc.returncode})")
    return lines[0]


def run_ffmpeg(args: list[str], what: str) -> str:
    """Run ffmpeg with an argument list (never a shell); raise MediaError with its stderr
    tail, or faults.MachineFault when the machine failed it (no space, killed ...: the
    output, the last argument, is named).

    Returns ffmpeg's stderr (errors it reported but survived, e.g. corrupt packets).
    """
    cmd = [ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-y", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        faults.check_process(proc.returncode, proc.stderr, f"{what} -> {args[-1]}")
        tail = " ".join(proc.stderr.strip().splitlines()[-3:]) or f"exit code {proc.returncode}"
        raise MediaError(f"{what}: ffmpeg failed: {tail}")
    return proc.stderr


@dataclass(frozen=True)
class VideoInfo:
    width: int
    height: int
    fps: float
    duration: float  # seconds, from the container; may be 0 when unknown
    codec: str = ""  # the video codec as ffmpeg names it (h264, vp9 ...)


def probe(path: str | os.PathLike) -> VideoInfo:
    """Stream properties of the first video stream of ``path`` (no ffprobe needed)."""
    import imageio_ffmpeg

    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise MediaError(f"{path}: empty file (0 bytes)")
    gen = imageio_ffmpeg.read_frames(str(path), output_params=["-frames:v", "0"])
    try:
        meta = next(gen)
    except (OSError, RuntimeError, StopIteration) as exc:
        text = str(exc)
        faults.check(exc, path)  # an OSError of the machine (EIO, EACCES ...)
        if faults.errno_in_text(text) is not None:  # ffmpeg could not read it: Permission denied ...
            raise faults.MachineFault(path, f"ffmpeg cannot read it: {text.strip().splitlines()[-1]}",
                                      errno=faults.errno_in_text(text)) from None
        if "Input #0" in text and not re.search(r"Stream #\S+.*: Video:", text):
            # ffmpeg read the container but found no video stream (e.g. audio only)
            kinds = sorted(set(re.findall(r"Stream #\S+.*?: (Audio|Subtitle|Data|Attachment):", text)))
            found = f" (only {', '.join(k.lower() for k in kinds)})" if kinds else ""
            raise MediaError(f"{path}: no video stream{found}") from None
        msg = text.strip().splitlines()
        # ffmpeg's own diagnosis (e.g. "moov atom not found" for a truncated mp4), if any
        notes = [re.sub(r"^(\[[^\]]*\]\s*)+", "", m) for m in msg if m.startswith("[")]
        notes = [n for n in notes if n and "Error opening" not in n]
        detail = f"{notes[-1]}; " if notes else ""
        raise MediaError(f"{path}: not a readable video ({detail}{msg[-1] if msg else exc})") from None
    finally:
        gen.close()
    width, height = meta.get("size") or (0, 0)
    if not width or not height:
        raise MediaError(f"{path}: no video stream")
    return VideoInfo(int(width), int(height), float(meta.get("fps") or 0.0), float(meta.get("duration") or 0.0),
                     str(meta.get("codec") or ""))


def iter_frames(path: str | os.PathLike, limit: int | None = None) -> Iterator[np.ndarray]:
    """Decode frames (BGR, HxWx3 uint8) one at a time; memory does not grow with length."""
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise MediaError(f"{path}: cannot open video")
    try:
        n = 0
        while limit is None or n < limit:
            ok, frame = cap.read()
            if not ok:
                break
            n += 1
            yield frame
    finally:
        cap.release()


def read_frames(path: str | os.PathLike, limit: int | None = None) -> list[np.ndarray]:
    """All frames of a (short) clip."""
    return list(iter_frames(path, limit))


def count_frames(path: str | os.PathLike) -> int:
    """Number of frames obtained by decoding the whole file."""
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise MediaError(f"{path}: cannot open video")
    n = 0
    try:
        while cap.grab():
            n += 1
    finally:
        cap.release()
    return n


def write_h264(frames: Iterable[np.ndarray], out: str | os.PathLike, *, fps: float = 30.0, crf: int = 23,
               preset: str = "veryfast") -> Path:
    """Encode BGR frames (all of one size) as an H.264 mp4, atomically: yuv420p (odd sizes
    padded to even), no metadata, bit-exact muxing, so the same frames give the same bytes."""
    frames = iter(frames)
    first = next(frames, None)
    if first is None:
        raise MediaError(f"{out}: no frames to encode")
    h, w = first.shape[:2]
    out = Path(out)
    with atomic_path(out, suffix=".tmp.mp4") as tmp:
        cmd = [ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-y",
               "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{w}x{h}", "-r", str(fps), "-i", "-",
               "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-c:v", "libx264", "-preset", preset,
               "-crf", str(crf), "-pix_fmt", "yuv420p", "-movflags", "+faststart",
               "-fflags", "+bitexact", "-map_metadata", "-1", str(tmp)]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            proc.stdin.write(np.ascontiguousarray(first).tobytes())
            for frame in frames:
                proc.stdin.write(np.ascontiguousarray(frame).tobytes())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        err = proc.stderr.read().decode(errors="replace")
        if proc.wait() != 0:
            faults.check_process(proc.returncode, err, out)
            raise MediaError(f"{out}: ffmpeg failed: {err.strip()[-300:]}")
    return out
