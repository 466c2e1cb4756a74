"""CVAT tasks of many clips: an image-sequence task per unit (or per N clips of a unit) made
from the frames stage's JPEGs, and the manifest that maps its frames back to clips.

A task's frames are its clips' frames one clip after the other, in clip-id order: task
frame ``first_frame + f - 1`` (0-based, as CVAT counts) is frame ``f`` (1-based) of the clip.
The task's data is ``frames.zip``, its JPEGs stored (not compressed again) under the names
``000000.jpg``, ``000001.jpg``, ... (task frame, zero-padded), so that CVAT's every
sorting method (lexicographical, natural, predefined) gives the same order; clip ids
would not (``a_999`` sorts after ``a_1000`` by name). Each task folder holds:

* ``annotations.xml``: CVAT for video 1.1 of the whole task, one track per (clip, person),
  ended (``outside``) where its clip ends;
* ``frames.zip``: the task's data;
* ``clips.tsv``: the manifest, one row per clip: ``clip_id, unit, first_frame, frames,
  width, height``.

``tasks.tsv`` in the folder above lists the tasks: ``task`` (the folder), ``name`` (the CVAT
task's name), ``clips``, ``frames``. :func:`read_tasks` is the one reader of both files.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from microg4m.common import faults
from microg4m.common.atomic import atomic_path, write_tsv
from microg4m.formats.cvat import CvatClip, CvatError

TASKS = "tasks.tsv"
MANIFEST = "clips.tsv"
ANNOTATIONS = "annotations.xml"
FRAMES = "frames.zip"
MANIFEST_COLUMNS = ["clip_id", "unit", "first_frame", "frames", "width", "height"]
TASKS_COLUMNS = ["task", "name", "clips", "frames"]


@dataclass(frozen=True)
class TaskClip:
    clip_id: str
    unit: str
    first_frame: int  # the task frame (0-based) of the clip's frame 1
    frames: int
    width: int
    height: int


@dataclass(frozen=True)
class Task:
    task: str  # its folder
    name: str  # the CVAT task's name
    clips: tuple[TaskClip, ...]

    @property
    def size(self) -> int:
        return sum(c.frames for c in self.clips)

    def clip_at(self, frame0: int) -> TaskClip:
        """The clip of task frame ``frame0`` (0-based); ValueError outside the task."""
        for c in self.clips:
            if c.first_frame <= frame0 < c.first_frame + c.frames:
                return c
        raise ValueError(f"task frame {frame0} is outside task {self.name} (0..{self.size - 1})")


def plan(clips_by_unit: dict[str, list], clips_per_task: int | None, prefix: str = "") -> list[Task]:
    """Tasks of the given clips (``Clip``-like: ``clip_id, frames, width, height``), per unit in
    the order given: one per unit, or one per ``clips_per_task`` clips of a unit
    (``<unit>-000``, ``<unit>-001``, ...). A task never holds clips of two units."""
    if clips_per_task is not None and clips_per_task < 1:
        raise ValueError(f"clips per task must be at least 1, got {clips_per_task}")
    tasks = []
    for unit, clips in clips_by_unit.items():
        clips = sorted(clips, key=lambda c: c.clip_id)
        step = clips_per_task or max(len(clips), 1)
        chunks = [clips[i:i + step] for i in range(0, len(clips), step)]
        for k, chunk in enumerate(chunks):
            folder = unit if clips_per_task is None else f"{unit}-{k:03d}"
            first, rows = 0, []
            for c in chunk:
                rows.append(TaskClip(c.clip_id, unit, first, int(c.frames), int(c.width), int(c.height)))
                first += int(c.frames)
            tasks.append(Task(folder, f"{prefix}{folder}", tuple(rows)))
    return tasks


def frame_name(frame0: int, size: int) -> str:
    """The file name of task frame ``frame0`` in ``frames.zip`` (at least 6 digits)."""
    return f"{frame0:0{max(6, len(str(max(size - 1, 0))))}d}.jpg"


def write_frames(path: str | os.PathLike, task: Task, jpegs) -> None:
    """``frames.zip`` of a task; ``jpegs(clip) -> [path of frame 1, ...]``; stored, not deflated."""
    with atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
            for c in task.clips:
                files = jpegs(c)
                if len(files) != c.frames:
                    raise ValueError(f"{c.clip_id}: {len(files)} JPEG frames, the clip has {c.frames}")
                for f, src in enumerate(files):
                    z.write(src, frame_name(c.first_frame + f, task.size))


def write_manifest(folder: str | os.PathLike, task: Task) -> None:
    rows = [[getattr(c, k) for k in MANIFEST_COLUMNS] for c in task.clips]
    write_tsv(Path(folder) / MANIFEST, pd.DataFrame(rows, columns=MANIFEST_COLUMNS))


def write_tasks(folder: str | os.PathLike, tasks: list[Task]) -> None:
    rows = [[t.task, t.name, len(t.clips), t.size] for t in tasks]
    write_tsv(Path(folder) / TASKS, pd.DataFrame(rows, columns=TASKS_COLUMNS))


def read_tasks(folder: str | os.PathLike) -> dict[str, Task]:
    """CVAT task name -> Task, from ``tasks.tsv`` and each task's ``clips.tsv`` (ValueError
    naming the file and the reason)."""
    folder = Path(folder)
    try:
        listed = pd.read_csv(folder / TASKS, sep="\t", dtype=str, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        faults.check(exc, folder / TASKS)  # no space, EIO, EACCES ...: never a bad input
        raise ValueError(f"{folder / TASKS}: cannot read the task list ({type(exc).__name__}: {exc})") from None
    if list(listed.columns) != TASKS_COLUMNS:
        raise ValueError(f"{folder / TASKS}: columns {','.join(listed.columns)}, expected {','.join(TASKS_COLUMNS)}")
    out = {}
    for r in listed.itertuples(index=False):
        path = folder / r.task / MANIFEST
        try:
            df = pd.read_csv(path, sep="\t", dtype={"clip_id": str, "unit": str}, keep_default_na=False)
            clips = tuple(TaskClip(str(c.clip_id), str(c.unit), int(c.first_frame), int(c.frames), int(c.width),
                                   int(c.height)) for c in df.itertuples(index=False))
        except (OSError, ValueError, AttributeError, pd.errors.ParserError) as exc:
            faults.check(exc, path)  # no space, EIO, EACCES ...: never a bad input
            raise ValueError(f"{path}: cannot read the task's clips ({type(exc).__name__}: {exc})") from None
        task = Task(r.task, r.name, clips)
        if task.size != int(r.frames) or [c.first_frame for c in clips] != [sum(x.frames for x in clips[:i])
                                                                            for i in range(len(clips))]:
            raise ValueError(f"{path}: the clips do not fill the task's {r.frames} frames one after the other")
        out[r.name] = task
    return out


def split(read: CvatClip, task: Task, path) -> tuple[list[CvatClip], list[tuple[str, str, str]]]:
    """The clips of a task's CVAT file, each as a CVAT file of its own (frames 1-based within
    the clip), and the tracks refused: ``(clip, track, reason)`` (a track over two clips;
    its clip's boxes are then not usable, the other clips' are)."""
    if read.size != task.size:
        raise CvatError(f"{path}: the task has {read.size} frames, task {task.name}'s manifest {task.size}")
    by_clip = {c.clip_id: CvatClip(c.clip_id, c.frames, c.width, c.height) for c in task.clips}
    refused = []
    for (pid, boxes), attrs, tid in zip(read.tracks, read.attributes, read.track_ids):
        clips = {task.clip_at(f - 1).clip_id for f in boxes}
        if len(clips) != 1:
            names = ", ".join(sorted(clips))
            for clip in sorted(clips):
                refused.append((clip, tid, f"track {tid} (person_id {pid or 'none'}) runs over clips {names}; "
                                            f"the boxes of {clip} are not used"))
            continue
        c = next(x for x in task.clips if x.clip_id in clips)
        shift = c.first_frame
        by_clip[c.clip_id].tracks.append((pid, {f - shift: b for f, b in boxes.items()}))
        by_clip[c.clip_id].attributes.append({f - shift: a for f, a in attrs.items()})
        by_clip[c.clip_id].track_ids.append(tid)
    return list(by_clip.values()), refused
