"""``microg4m labels import --from cvat``: CVAT for video 1.1 exports back into an actions file
(the persons' actions at their AVA keyframes) and the boxes into correction files.

A file is either the export of a task ``labels export --to cvat`` made (its task name is in
the task list ``tasks.tsv``; the manifest maps its frames back to clips), or the export of a
one-clip video task (docs/cvat.md: its video names the clip). Per person (track, or tracks
with one ``person_id``) the actions are the attributes CVAT shows at the person's AVA
keyframe, that is the export's keyframe of the boxes the file gives: the ``pose`` (one) and
every yes/no box that is ticked. A track drawn in CVAT (``person_id`` 0) is the person the
correction will add (the next id the clip never had, as the corrections stage numbers it).

Boxes: a clip whose boxes differ from its final tracks gets a correction file,
``<corrections>/<clip>.xml`` (CVAT for video 1.1 of the clip, as docs/cvat.md's), which the
next ``snakemake`` run applies. Refused, each with file, clip, person and reason, while the
rest goes on: a file that is not such an export, a task or clip the run does not know, a
track over two clips, an unknown action, two poses at one keyframe, a clip that already has
a correction file of another name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from microg4m.formats import cvat, cvat_tasks
from microg4m.formats.action_attributes import POSE, RESERVED, ActionAttributeError, ActionAttributes
from microg4m.formats.tracks import COLUMNS, read_tracks
from microg4m.stages import corrections
from .label_intake import Intake
from .label_persons import keyframe_of

SUFFIXES = (".xml", ".zip")


def export_files(path) -> list[Path]:
    """One export file, or every ``.xml``/``.zip`` under a folder (recursively), except the
    ``annotations.xml`` that ``labels export`` wrote beside a manifest."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES
                  and not (p.name == cvat_tasks.ANNOTATIONS and (p.parent / cvat_tasks.MANIFEST).is_file()))


def find_tasks(path, tasks_dir=None) -> dict[str, cvat_tasks.Task]:
    """The task list: ``tasks_dir``'s, else the first ``tasks.tsv`` in PATH or a folder above it."""
    if tasks_dir is not None:
        return cvat_tasks.read_tasks(tasks_dir)
    for folder in [Path(path), *Path(path).resolve().parents]:
        if (folder / cvat_tasks.TASKS).is_file():
            return cvat_tasks.read_tasks(folder)
    return {}


def actions_at(attrs: ActionAttributes, values: dict[str, list[str]]) -> list[int]:
    """The action ids of one person's attributes at one frame (ActionAttributeError: why not)."""
    ticked = [n for n, v in values.items() if n not in RESERVED and any(x.lower() == "true" for x in v)]
    return attrs.ids(values.get(POSE, []), ticked)


class CvatImport:
    def __init__(self, intake: Intake, attrs: ActionAttributes, corrections_dir=None, sources=()):
        self.intake, self.attrs = intake, attrs
        self.corrections_dir = Path(corrections_dir) if corrections_dir else None
        self.existing = corrections.index(self.corrections_dir, set(sources))[0] if self.corrections_dir else {}
        self.written: list[str] = []
        self._tracks: dict[str, dict] = {}

    def read(self, path, tasks: dict[str, cvat_tasks.Task]) -> None:
        """One export file (everything refused is reported; nothing raises)."""
        try:
            got = cvat.read(path)
            task = tasks.get(got.clip_id)
            if task is not None:
                clips, refused = cvat_tasks.split(got, task, path)
            else:
                clips, refused = [got], []
        except (cvat.CvatError, ValueError, OSError) as exc:
            self.intake.refuse(path, "", "", str(exc).removeprefix(f"{path}: "))
            return
        broken = set()
        for clip_id, tid, why in refused:
            self.intake.refuse(path, clip_id, "", why)
            broken.add(clip_id)
        for c in clips:
            if task is None and self.intake.index.get(c.clip_id) is None:
                self.intake.refuse(path, c.clip_id, "", f"task {c.clip_id!r} is neither a clip of the run nor a task "
                                                         f"of the task list (tasks.tsv); is it another run's?")
                continue
            self.clip(path, c, boxes=c.clip_id not in broken)

    def _tracker_rows(self, clip) -> pd.DataFrame:
        """The tracker's rows of a clip (``tracks/{unit}.csv``, as the corrections stage merges
        against), each unit's file read once."""
        if clip.unit not in self._tracks:
            path = self.intake.index.files(clip.unit).tracks
            df = read_tracks(path, on_problem=lambda m: None) if path.is_file() else _no_rows()
            self._tracks[clip.unit] = {c: g for c, g in df.groupby("video_id")}
        return self._tracks[clip.unit].get(clip.clip_id, _no_rows())

    def clip(self, path, c: cvat.CvatClip, boxes: bool = True) -> None:
        clip = self.intake.clip(path, c.clip_id)
        if clip is None:
            return
        if c.size != clip.frames or (c.width is not None and (c.width, c.height) != (clip.width, clip.height)):
            return self.intake.refuse(path, c.clip_id, "", f"the task's {c.size} frames of {c.width}x{c.height} are "
                                                            f"not clip {c.clip_id}'s {clip.frames} of "
                                                            f"{clip.width}x{clip.height}: another clip's file?")
        try:
            merged = corrections.merge(c, path, self._tracker_rows(clip))
        except cvat.CvatError as exc:
            return self.intake.refuse(path, c.clip_id, "", str(exc).removeprefix(f"{path}: "))
        given = {pid for pid, _ in c.tracks if pid is not None}
        new_ids = iter(sorted(set(merged["person_id"]) - given))
        per_person: dict[int, list[int]] = {}
        for (pid, frames), attrs in zip(c.tracks, c.attributes):
            pid = pid if pid is not None else next(new_ids)
            per_person.setdefault(pid, [])
            per_person[pid].append((frames, attrs))
        if boxes:
            self._boxes(path, c, clip, merged, per_person)
        if not any(POSE in a or set(a) & set(self.attrs.id_of) for t in c.attributes for a in t.values()):
            return self.intake.refuse(path, c.clip_id, "", "no action attributes in the file (a boxes-only file, "
                                                            "e.g. results/cvat/): the persons' actions are left as "
                                                            "they are")
        for pid, parts in sorted(per_person.items()):
            frames = sorted(f for boxes_, _ in parts for f in boxes_)
            key = keyframe_of(clip, frames)
            values = next(a[key] for b, a in parts if key in a)
            try:
                ids = actions_at(self.attrs, values)
            except ActionAttributeError as exc:
                self.intake.refuse(path, c.clip_id, pid, f"at its AVA keyframe (frame {key}): {exc}")
                continue
            self.intake.add(path, c.clip_id, pid, ids)

    def _boxes(self, path, c, clip, merged, per_person) -> None:
        """A correction file for the clip when its boxes are not its final tracks'."""
        now = self.intake.index.track_rows(c.clip_id)
        before = {(int(f), int(p)): np.asarray(b, float) for f, p, *b in now}
        after = {(int(r.frame_id), int(r.person_id)): np.array([r.xmin, r.ymin, r.xmax, r.ymax])
                 for r in merged.itertuples(index=False)}
        same = before.keys() == after.keys() and all(np.abs(before[k] - after[k]).max() <= cvat.TOL for k in after)
        if same or self.corrections_dir is None:
            return
        target = self.corrections_dir / f"{c.clip_id}.xml"
        other = self.existing.get(c.clip_id)
        if other is not None and Path(other).resolve() != target.resolve():
            return self.intake.refuse(path, c.clip_id, "", f"changed boxes not written: {other} already corrects "
                                                            f"{c.clip_id}; remove it and import again")
        rows = merged[["frame_id", "person_id", "xmin", "ymin", "xmax", "ymax"]].itertuples(index=False, name=None)
        target.parent.mkdir(parents=True, exist_ok=True)
        cvat.write_clip(target, c.clip_id, rows, frames=clip.frames, width=clip.width, height=clip.height)
        self.intake.drawn |= {(c.clip_id, p) for p in per_person}
        self.written.append(str(target))


def _no_rows():
    return pd.DataFrame(columns=COLUMNS).astype({"frame_id": int, "person_id": int})


def run(intake: Intake, attrs: ActionAttributes, path, *, tasks_dir=None, corrections_dir=None) -> dict:
    """Read every export file of ``path`` into the intake; the correction files written."""
    tasks = find_tasks(path, tasks_dir)
    sources = {s for ss in intake.index.units().values() for s in ss}
    job = CvatImport(intake, attrs, corrections_dir, sources)
    files = export_files(path)
    if not files:
        intake.refuse(path, "", "", "no CVAT export (.xml or .zip) found")
    for f in files:
        job.read(f, tasks)
    return {"files": len(files), "corrections": job.written}

