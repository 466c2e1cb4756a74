"""Trim stage: cut one source into exact 3-second, 30 fps clips in one ffmpeg pass.

The reference's settings: segment muxer, 3 s segments, timestamps reset per segment,
forced keyframes every 3 s, libx264, 30 fps, no audio. Every kept clip is checked by
decoding: it has exactly 90 frames or it is dropped and recorded with the reason.

Which source frames a clip holds (``align``):

* ``exact`` (the default): clip k holds the source's frames of its window, 3k to 3k + 3 s
  (counted from the first frame). It starts on the first source frame at or after 3k
  (frame 150 at 50 fps, 180 at 60, 90 = 3.003 s at 29.97), and output frame i shows
  the source frame nearest to t = 3k + i/30 s, looking at most half an output frame
  (1/60 s) ahead: the frame on screen at t, or the next one when it starts less than
  1/60 s after t and nearer (a tie goes to the later). So no clip shows a frame of
  another window, and a cut on the frame that starts a window stays between two clips.
  One exception, for variable frame rates: when the frame on screen at 3k stays there
  for more than SNAP_SECONDS (50 ms) into the window (it was held), the clip starts on
  it rather than on the later frame. The filter graph does all this exactly, whatever
  the frame rate: the time base is refined so that half of any frame interval, 1/60 s
  and 3 s are whole numbers, each frame's timestamp is moved back to the time from
  which it is to be shown (half-way to the previous frame, at most 1/60 s; back to
  the window's start for the first frame of a window), and ``fps=30:round=up`` then
  gives every tick the last frame whose moved timestamp is at or before it. The
  segment muxer cuts at the ticks 90k, i.e. at 3k s of the source.
* ``reference``: the authors' command (``-r 30`` on the output: ffmpeg's constant-rate
  conversion; no filter and the source's pixel format), whose clips it gives byte for
  byte with the same ffmpeg and x264 preset (a source of odd width or height is scaled
  to even ones, which the authors' command cannot encode). That conversion drops a
  source frame only when the output has run more than 1.1 output frames ahead of the
  end of that frame (a dead band against jitter), so from a source faster than 30 fps
  the output settles more than one output frame ahead of the source: every clip after
  the first starts early (clip 1 on frame 148 or 147 at 50 fps, 177 or 176 at 59.94 fps,
  177 at 60 fps, with the pinned ffmpeg or Debian's 5.1, where ``exact`` starts on 150
  and 180). At 30 fps both modes give identical clips.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
from pathlib import Path

import cv2
import pandas as pd

from microg4m import CLIP_SECONDS
from microg4m.common import free_space, media
from microg4m.common.atomic import write_tsv
from microg4m.formats.records import read_records
from microg4m.formats.manifest import clip_id, write_manifest


ALIGNS = ("exact", "reference")


def _video_filter(max_height: int | None, fps: int = 30) -> str:
    """The -vf of align=exact: start at t=0 (force_key_frames and the segment cuts count
    from there), the fps filter picks the source frames (module doc), then even
    dimensions (yuv420p needs them), optionally capped."""
    steps = [
        # 1/120 of the source's time base: half of any frame interval, 1/60 s, 1/20 s
        # and 3 s are whole numbers of it, so nothing below is rounded
        "settb=expr=intb/120",
        "setpts=PTS-STARTPTS",
        "setpts=" + _exact_pts(fps).replace(",", "\\,"),
        # every output tick: the last frame at or before it (an exact rational compare)
        f"fps={int(fps)}:round=up",
        _even_scale(max_height),
        "setsar=1",
    ]
    return ",".join(steps)


def _even_scale(max_height: int | None) -> str:
    height = f"2*trunc(min(ih\\,{int(max_height)})/2)" if max_height else "2*trunc(ih/2)"
    width = "-2" if max_height else "2*trunc(iw/2)"
    return f"scale={width}:{height}"


def _reference_video_args(video: Path, max_height: int | None) -> list[str]:
    """The picture options of align=reference: none, as in the authors' command (no filter,
    the source's pixel format: a full-range source stays full range, and -r alone picks
    the frames), unless the source's size needs a scale (odd dimensions, which 4:2:0 H.264
    cannot hold and the authors' command fails on) or trim.max_height caps it."""
    if not max_height:
        try:
            info = media.probe(video)
        except media.MediaError:
            info = None  # ffmpeg itself then says what is wrong with the source
        if info is None or (info.width % 2 == 0 and info.height % 2 == 0):
            return []
    return ["-vf", _even_scale(max_height)]


SNAP_SECONDS = 0.05  # a window starts on a frame this close after its start (module doc)


def _exact_pts(fps: int) -> str:
    """The setpts expression of align=exact: the time from which each frame is shown.

    A frame is shown from half-way back to the previous frame, at most half an output
    frame early (then ``fps=..:round=up`` gives every tick the nearest frame, looking at
    most 1/(2 fps) ahead); a frame that is the first of a window and starts less than
    SNAP_SECONDS after the window's start is shown from that start.
    """
    window = f"round({CLIP_SECONDS}/TB)"
    start = f"{window}*floor(PTS/{window})"  # the start of the frame's window
    shifted = f"(PTS-min((PTS-PREV_INPTS)/2,round(1/({2 * int(fps)}*TB))))"
    snap = f"lt(PREV_INPTS,{start})*lt(PTS-{start},round({SNAP_SECONDS}/TB))"
    return f"if(N,if({snap},min({shifted},{start}),{shifted}),PTS)"


def decode_problems(stderr: str) -> str:
    """A one-line, deterministic summary of the errors ffmpeg survived ('' when none).

    ffmpeg exits 0 on a corrupt or truncated source (it skips what it cannot decode and
    the constant-rate output fills the gap), so its messages are the only trace. Their order and
    numbers vary between runs (threads), hence only the sorted distinct kinds are kept.
    """
    kinds = set()
    for line in stderr.splitlines():
        line = re.sub(r" @ 0x[0-9a-fA-F]+", "", line).strip()
        line = re.sub(r"\(.*?\)|-?\b(0x[0-9a-fA-F]+|\d+)\b", "", line)
        line = " ".join(line.split()).rstrip(" .,:")
        if line and not line.startswith("Last message repeated"):
            kinds.add(line)
    if not kinds:
        return ""
    what = "source truncated" if any("partial file" in k for k in kinds) else "source has corrupt data"
    return f"{what}: ffmpeg decoding errors ({'; '.join(sorted(kinds)[:3])})"


def segment_source(video: Path, out_dir: Path, source_id: str, *, fps: int = 30,
                   max_height: int | None = None, crf: int = 23, preset: str = "veryfast",
                   align: str = "exact") -> "Segments":
    """Run the one-pass segmenting ffmpeg; return the segment files in order (a list whose
    ``problems`` attribute summarizes the decoding errors ffmpeg survived, see decode_problems)."""
    check_align(align)
    pattern = out_dir / f"{source_id}_%03d.mp4"
    # reference: the output option -r re-times (ffmpeg's constant-rate conversion);
    # exact: the filter graph already gives one frame per 1/fps tick, passed through as is
    if align == "reference":
        picture = [*_reference_video_args(video, max_height), "-r", str(fps), "-fps_mode", "cfr"]
    else:
        picture = ["-vf", _video_filter(max_height, fps), "-fps_mode", "passthrough", "-pix_fmt", "yuv420p"]
    stderr = media.run_ffmpeg([
        "-i", str(video), "-map", "0:v:0", "-an", "-sn", "-dn", *picture,
        "-c:v", "libx264", "-preset", preset, "-crf", str(crf),
        "-force_key_frames", f"expr:gte(t,n_forced*{CLIP_SECONDS})",
        # segment_time_delta of half a frame: ffmpeg's documented remedy for keyframes
        # whose time rounds to just under the boundary (else a segment spans 6 s).
        "-f", "segment", "-segment_time", str(CLIP_SECONDS),
        "-segment_time_delta", f"{0.5 / fps:.6f}", "-reset_timestamps", "1",
        "-segment_start_number", "0", "-segment_format", "mp4",
        str(pattern),
    ], what=str(video))
    return Segments(segment_files(out_dir, source_id), decode_problems(stderr))


def segment_files(folder: Path, source_id: str) -> list[Path]:
    """The clip files of ``source_id`` in ``folder`` (``{source_id}_{seq}.mp4``, seq of 3 or
    more digits; never another source's, e.g. ``talk_2_000.mp4`` for ``talk``), in the
    order of their number: from 1,000 segments on (50 minutes) a name sort would put
    ``src_1000`` before ``src_101``."""
    name = re.compile(rf"{re.escape(source_id)}_(\d{{3,}})\.mp4")
    found = [(int(m.group(1)), p) for p in Path(folder).iterdir() if (m := name.fullmatch(p.name))]
    return [p for _, p in sorted(found)]


def check_align(align: str) -> None:
    if align not in ALIGNS:
        raise ValueError(f"trim.align = {align!r}: expected one of {', '.join(ALIGNS)}")


class Segments(list):
    """The segment files in order, with ``problems``: ffmpeg's survived errors ('' if none)."""

    def __init__(self, paths, problems: str = ""):
        super().__init__(paths)
        self.problems = problems


def _decode_check(path: Path) -> tuple[int, int, int]:
    """(frames, width, height) by decoding the clip."""
    cap = cv2.VideoCapture(str(path))
    width, height = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
    cap.release()
    return media.count_frames(path), width, height


STATUS_COLUMNS = ["source_id", "status", "reason", "clips", "dropped"]


def trim_source(record: dict, results: Path, clip_dir: Path, *, fps: int = 30,
                max_height: int | None = None, crf: int = 23, preset: str = "veryfast",
                align: str = "exact") -> tuple[dict, list[dict]]:
    """Trim the video of one download record into ``clip_dir``: (status row, manifest rows)."""
    source_id, clip_type = record["source_id"], record["clip_type"]
    for old in segment_files(clip_dir, source_id):  # leftovers of an earlier run
        old.unlink()
    for old in clip_dir.glob(f".{glob.escape(source_id)}.*"):  # segment folders of a killed run
        shutil.rmtree(old, ignore_errors=True)
    if record["status"] != "ok":
        return {"source_id": source_id, "status": "skipped", "reason": f"download failed: {record['reason']}",
                "clips": 0, "dropped": 0}, []
    expected = CLIP_SECONDS * int(fps)
    rows: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix=f".{source_id}.", dir=clip_dir))
    try:
        try:
            segments = segment_source(results / record["path"], tmp, source_id, fps=fps,
                                      max_height=max_height, crf=crf, preset=preset, align=align)
            error = None
        except media.MediaError as exc:
            segments, error = Segments([]), str(exc)
        for seg in segments:
            seq = int(seg.stem.rsplit("_", 1)[1])
            frames, width, height = _decode_check(seg)
            ok = frames == expected
            if ok:
                os.replace(seg, clip_dir / seg.name)
                reason = ""
            elif seg == segments[-1] and frames < expected:
                reason = f"final clip shorter than {CLIP_SECONDS} s ({frames} frames)"
            else:
                reason = f"{frames} decoded frames, expected {expected}"
            rows.append({"clip_id": clip_id(source_id, seq), "source_id": source_id,
                         "clip_type": clip_type, "seq": seq, "start_s": seq * CLIP_SECONDS,
                         "frames": frames, "width": width, "height": height,
                         "status": "ok" if ok else "dropped", "reason": reason})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n_ok = sum(r["status"] == "ok" for r in rows)
    if error and not n_ok:
        status = {"status": "failed", "reason": error}
    else:
        notes = [error or ("" if n_ok else f"no clip of {CLIP_SECONDS} s (source too short)"), segments.problems]
        status = {"status": "ok", "reason": "; ".join(n for n in notes if n)}
    return {"source_id": source_id, **status, "clips": n_ok, "dropped": len(rows) - n_ok}, rows


def run(downloads: str | os.PathLike, manifest: str | os.PathLike, status: str | os.PathLike,
        check_free_space: bool = True, **settings) -> list[dict]:
    """Trim every source of a download table into ``clips/{unit}/``; write manifest + status.
    ``check_free_space``: first check that the clips fit (microg4m/common/free_space.py)."""
    check_align(settings.get("align", "exact"))  # before any source, not once per source
    downloads, manifest = Path(downloads), Path(manifest)
    results = downloads.parent.parent
    records = read_records(downloads)
    if check_free_space:
        need = free_space.clips_bytes(records, fps=settings.get("fps", 30), max_height=settings.get("max_height"))
        free_space.require(manifest.parent, need, f"the clips of {downloads.name} ({len(records)} sources)")
    manifest.parent.mkdir(parents=True, exist_ok=True)
    statuses, rows = [], []
    for record in records:
        st, clip_rows = trim_source(record, results, manifest.parent, **settings)
        statuses.append(st)
        rows.extend(clip_rows)
    write_tsv(status, pd.DataFrame(statuses, columns=STATUS_COLUMNS))
    write_manifest(manifest, rows)
    return statuses
