"""JPEG frames of the kept clips and the PySlowFast frame lists.

Frames: ``<out_dir>/<clip>/<clip>_%06d.jpg`` (in the workflow ``frames/{unit}/``, the
rule's output folder, so a clip no longer kept leaves no frames behind, and the export
links the dataset's clips into one folder, ``export/frames/<clip>``), 1-based, one per
decoded frame (90 per clip), written by ffmpeg (``-q:v``) into a temporary folder that is renamed into place
only when the count is right, so a clip folder is either complete or absent. Beside
each JPEG a relative symbolic link ``img_%05d.jpg`` names the same frame the way
mmaction2 reads raw frames (its ``filename_tmpl`` is one template for every clip and
cannot hold the clip id), so one folder serves PySlowFast (through the frame lists)
and mmaction2, without a second copy of the JPEGs.

Frame lists: ``frame_lists/{train,val,test}.csv``, space-separated, header
``original_video_id video_id frame_id path labels``, rows
``<clip> <clip> <n> <clip>/<clip>_<n:06d>.jpg ""`` (as released).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

from microg4m.common import faults, free_space
from microg4m.common.progress import progress
from microg4m import CLIP_FRAMES
from microg4m.common.atomic import write_tsv
from microg4m.formats.decisions import read_decisions
from microg4m.formats.manifest import clip_file, read_manifest
from microg4m.common.media import MediaError, run_ffmpeg
from microg4m.formats.clips import kept_clips
from microg4m.formats.frame_lists import FRAME_TMPL

MMACTION2_TMPL = "img_{:05}.jpg"  # mmaction2's AVADataset default filename_tmpl
# path: the clip's frame folder, relative to the done list's folder (frames/{unit}.tsv ->
# {unit}/<clip>): the one way to find a clip's frames (the export links them from it)
DONE_COLUMNS = ["clip_id", "frames", "status", "reason", "path"]


def extract_clip(video: Path, out_dir: Path, clip: str, expected: int, jpeg_quality: int) -> int:
    """Write the clip's frames to ``out_dir/clip`` atomically; return the frame count."""
    if not video.is_file():
        raise MediaError(f"{video}: no such file")
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(f".{glob.escape(clip)}.*"):  # the temporary folders of a killed run
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{clip}.", dir=out_dir))
    try:
        run_ffmpeg(
            [
                "-i",
                str(video),
                "-map",
                "0:v:0",
                "-fps_mode",
                "passthrough",
                "-q:v",
                str(jpeg_quality),
                "-start_number",
                "1",
                "-f",
                "image2",
                str(tmp / f"{clip}_%06d.jpg"),
            ],
            str(video),
        )
        n = len(list(tmp.glob("*.jpg")))
        if n != expected:
            raise MediaError(f"{video}: decoded {n} frames, expected {expected}")
        for i in range(1, n + 1):
            os.symlink(FRAME_TMPL.format(clip=clip, n=i), tmp / MMACTION2_TMPL.format(i))
        final = out_dir / clip
        old = None
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{clip}.old.", dir=out_dir))
            os.replace(final, old / clip)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old)
        return n
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _clean(reason: str) -> str:
    """One line, without ffmpeg's memory addresses (``[in#0 @ 0x55...]``), so reruns match."""
    return " ".join(re.sub(r" @ 0x[0-9a-fA-F]+", "", reason).split())


def run(
    manifest: str | os.PathLike,
    decisions: str | os.PathLike,
    out_dir: str | os.PathLike,
    done: str | os.PathLike | None = None,
    *,
    jpeg_quality: int = 2,
    check_free_space: bool = True,
) -> pd.DataFrame:
    """Extract the frames of every kept clip of one unit.

    Writes the done list ``done`` (default ``<out_dir>/<unit>.tsv``, unit = the
    manifest's folder name): ``clip_id, frames, status (ok/failed), reason, path`` (the
    clip's frame folder relative to the done list's). A clip that fails is recorded with
    the reason and the others go on; a fault of the machine (no space ...) fails the job.
    ``check_free_space``: first check that the frames fit (microg4m/common/free_space.py).
    """
    manifest, out_dir = Path(manifest), Path(out_dir)
    done = Path(done) if done is not None else out_dir / f"{manifest.parent.name}.tsv"
    out_dir.mkdir(parents=True, exist_ok=True)  # also without a kept clip: the workflow's output
    try:
        clips = kept_clips(read_manifest(manifest), read_decisions(decisions))
    except (OSError, KeyError, ValueError) as exc:
        raise ValueError(f"frames: cannot read {manifest} / {decisions}: {type(exc).__name__}: {exc}") from None
    if check_free_space:
        free_space.require(out_dir, free_space.frames_bytes(clips.itertuples(index=False)),
                           f"the frames of {len(clips)} kept clips of {manifest.parent.name}")
    rows = []
    for r in progress(clips.itertuples(index=False), "frames", total=len(clips)):
        expected = int(r.frames) or CLIP_FRAMES
        where = Path(os.path.relpath(out_dir / r.clip_id, done.parent)).as_posix()
        try:
            n = extract_clip(clip_file(manifest, r.clip_id), out_dir, r.clip_id, expected, jpeg_quality)
            rows.append([r.clip_id, n, "ok", "", where])
        except (MediaError, OSError) as exc:
            faults.check(exc, out_dir / r.clip_id)  # no space, EIO ...: the job fails, nothing is recorded
            print(f"frames: {r.clip_id}: {exc}", file=sys.stderr)
            rows.append([r.clip_id, 0, "failed", _clean(str(exc)), where])
    df = pd.DataFrame(rows, columns=DONE_COLUMNS)
    write_tsv(done, df)
    return df


