"""Corrections in: CVAT for video exports in ``annotations/corrections/`` replace the
tracks of their clips.

A correction file is CVAT's "CVAT for video 1.1" export of a task made from one clip's
mp4 (the ``annotations.xml``, or the export's ``.zip`` as CVAT gives it); its clip is the
task's video name (``<source>``; else the task name). For that clip the file replaces
every tracked box: a moved box, a deleted track, a new track, a track that ends earlier
all come through, and the frames between keyframes are what CVAT shows (its linear
interpolation). Person ids travel in the ``person_id`` track attribute; a track without
one (or 0) is a new person and gets the next id the clip never had, so labels of a
deleted person never move to someone else. Two tracks with one ``person_id`` are one
person (e.g. after CVAT's split) unless they overlap in time, which is an error. A box
whose position is unchanged keeps the tracker's confidence; any other gets 1.0.

The workflow indexes the folder before any job runs (:func:`index`): each file's clip
decides which unit's ``track_files`` job reads it. Each job (:func:`run`) writes
``corrected/{unit}.csv``, the unit's tracks with the corrections applied (a byte copy of
``tracks/{unit}.csv`` when there are none), and ``corrected/{unit}.tsv``, one row per
file with its status. A file that cannot be used (not XML, a CVAT for images export,
another clip's size, a clip that is not kept, ...) is reported with the file and the
reason; that clip keeps its tracker boxes and everything else goes on.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from microg4m.formats import cvat
from microg4m.common.atomic import atomic_path, write_text, write_tsv
from microg4m.formats.decisions import read_decisions
from microg4m.formats.manifest import read_manifest
from microg4m.formats.tracks import COLUMNS, read_tracks

REPORT_COLUMNS = ["file", "clip_id", "status", "persons_before", "persons_after", "reason"]
SUFFIXES = (".xml", ".zip")


def files_in(folder) -> list[Path]:
    """The correction files of a folder (``*.xml``, ``*.zip``; not recursive), sorted."""
    folder = Path(folder) if folder else None
    if folder is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)


def index(folder, sources) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """Clip id -> correction file, and the files that cannot be used: ``(file, clip, problem)``.

    ``sources``: the source ids of the run; a file whose clip belongs to none is a problem,
    and so are two files for one clip (neither is used).
    """
    by_clip: dict[str, list[str]] = {}
    problems = []
    for path in files_in(folder):
        try:
            clip = cvat.peek_clip(path)
        except (ValueError, OSError, RuntimeError, NotImplementedError) as exc:  # never stop the DAG
            msg = str(exc) if isinstance(exc, cvat.CvatError) else f"{path}: {type(exc).__name__}: {exc}"
            problems.append((str(path), "", msg))
            continue
        if clip.rsplit("_", 1)[0] not in sources:
            problems.append((str(path), clip, f"{path}: clip {clip!r} is of no source in the sources table; ignored"))
            continue
        by_clip.setdefault(clip, []).append(str(path))
    chosen = {}
    for clip, paths in sorted(by_clip.items()):
        if len(paths) == 1:
            chosen[clip] = paths[0]
        else:
            for p in paths:
                problems.append((p, clip, f"{p}: {len(paths)} correction files for {clip} "
                                          f"({', '.join(Path(q).name for q in paths)}); none used"))
    for p in problems:
        print(f"corrections: {p[2]}", file=sys.stderr)
    return chosen, problems


def merge(clip: cvat.CvatClip, path, original: pd.DataFrame) -> pd.DataFrame:
    """The clip's new track rows (``COLUMNS``) from a read CVAT file and the clip's original rows."""
    persons: dict[int, dict[int, tuple]] = {}
    new = []
    for pid, boxes in clip.tracks:
        if pid is None:
            new.append(boxes)
        elif pid in persons:
            both = sorted(set(persons[pid]) & set(boxes))
            if both:
                raise cvat.CvatError(f"{path}: two tracks have person_id {pid} on frame(s) "
                                     f"{', '.join(map(str, both[:5]))}{' ...' if len(both) > 5 else ''}")
            persons[pid].update(boxes)
        else:
            persons[pid] = dict(boxes)
    next_id = max([*original["person_id"].tolist(), *persons, 0]) + 1
    for boxes in new:
        persons[next_id] = boxes
        next_id += 1
    before = {(int(r.person_id), int(r.frame_id)): r for r in original.itertuples(index=False)}
    rows = []
    for pid in sorted(persons):
        for frame in sorted(persons[pid]):
            box = np.round(np.array(persons[pid][frame], dtype=float), 2)
            old = before.get((pid, frame))
            same = old is not None and np.abs(box - [old.xmin, old.ymin, old.xmax, old.ymax]).max() <= cvat.TOL
            rows.append((clip.clip_id, frame, pid, *box.tolist(), float(old.conf) if same else 1.0))
    return pd.DataFrame(rows, columns=COLUMNS)


def _check(c: cvat.CvatClip, path, clips: pd.DataFrame, kept: dict) -> None:
    if c.clip_id not in clips.index:
        raise cvat.CvatError(f"{path}: clip {c.clip_id} is not a clip of its source's manifest")
    m = clips.loc[c.clip_id]
    if m["status"] != "ok":
        raise cvat.CvatError(f"{path}: clip {c.clip_id} was dropped by trim ({m['reason']})")
    if c.clip_id not in kept:
        raise cvat.CvatError(f"{path}: clip {c.clip_id} has no filter decision")
    if kept[c.clip_id] != "1":
        raise cvat.CvatError(f"{path}: clip {c.clip_id} is not kept by the filter; its boxes are not used")
    if c.size != int(m["frames"]):
        raise cvat.CvatError(f"{path}: the task has {c.size} frames, clip {c.clip_id} has {m['frames']}")
    if c.width is not None and (c.width, c.height) != (int(m["width"]), int(m["height"])):
        raise cvat.CvatError(f"{path}: the task's frames are {c.width}x{c.height}, "
                             f"clip {c.clip_id}'s are {m['width']}x{m['height']}")


def _fmt_rows(df: pd.DataFrame) -> list[str]:
    return [f"{r.video_id},{r.frame_id},{r.person_id},{r.xmin:.2f},{r.ymin:.2f},{r.xmax:.2f},{r.ymax:.2f},{r.conf:.4f}"
            for r in df.itertuples(index=False)]


def run(tracks, manifest, decisions, files, out_tracks, out_report) -> pd.DataFrame:
    """Apply the correction ``files`` of one unit; write the corrected tracks and the report."""
    files = sorted(map(str, files))
    report = []
    if not files:
        with atomic_path(out_tracks) as tmp:
            shutil.copyfile(tracks, tmp)
        write_tsv(out_report, pd.DataFrame(columns=REPORT_COLUMNS))
        return pd.DataFrame(columns=REPORT_COLUMNS)
    t = read_tracks(tracks)
    clips = read_manifest(manifest).set_index("clip_id", drop=False)
    d = read_decisions(decisions)
    kept = dict(zip(d["clip_id"], d["keep"].str.strip()))
    replaced: dict[str, pd.DataFrame] = {}
    for path in files:
        clip_id = ""
        try:
            c = cvat.read(path)
            clip_id = c.clip_id
            if clip_id in replaced:
                raise cvat.CvatError(f"{path}: a second correction file for {clip_id}; not used")
            _check(c, path, clips, kept)
            original = t[t["video_id"] == clip_id]
            replaced[clip_id] = merge(c, path, original)
            report.append((path, clip_id, "applied", original["person_id"].nunique(),
                           replaced[clip_id]["person_id"].nunique(), ""))
        except (ValueError, KeyError, OSError) as exc:  # CvatError names the file; anything else too
            msg = str(exc) if isinstance(exc, cvat.CvatError) else f"{path}: {type(exc).__name__}: {exc}"
            print(f"corrections: {msg}", file=sys.stderr)
            report.append((path, clip_id, "failed", "", "", " ".join(msg.split())))
    rep = pd.DataFrame(report, columns=REPORT_COLUMNS)
    write_tsv(out_report, rep)
    if not replaced:
        with atomic_path(out_tracks) as tmp:
            shutil.copyfile(tracks, tmp)
        return rep
    lines = pd.read_csv(tracks, dtype=str, keep_default_na=False)  # untouched rows stay byte-identical
    keep = lines[~lines["video_id"].isin(replaced)]
    text = [",".join(r) for r in keep[COLUMNS].itertuples(index=False, name=None)]
    order = list(zip(keep["video_id"], keep["frame_id"].astype(int), keep["person_id"].astype(int)))
    for df in replaced.values():
        text += _fmt_rows(df)
        order += list(zip(df["video_id"], df["frame_id"], df["person_id"]))
    text = [line for _, line in sorted(zip(order, text), key=lambda x: x[0])]
    write_text(out_tracks, ",".join(COLUMNS) + "\n" + "".join(f"{line}\n" for line in text))
    return rep


def read_report(path: str | os.PathLike) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


def not_used(problems, reports) -> list[tuple[str, str, str]]:
    """``(file, clip, problem)`` of every correction file that was not used: the index's
    problems and the failed rows of the jobs' reports (for the export's input report)."""
    rows = [tuple(p) for p in problems]
    for path in reports:
        rep = read_report(path)
        rows += [(r.file, r.clip_id, r.reason) for r in rep[rep["status"] == "failed"].itertuples(index=False)]
    return [(f, c, msg.removeprefix(f"{f}: ")) for f, c, msg in rows]
