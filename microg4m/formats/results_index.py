"""The one index of a run's results folder: which units are current, their sources, every
clip with its unit and files, a unit's final tracks, and a clip's persons and boxes.

A clip knows its unit. Per-unit files (``clips/{unit}/``, ``filter/{unit}.tsv``,
``tracks/{unit}.csv``, ``corrected/{unit}.csv``, ...) are found here by everyone who reads
a finished (or running) results folder: the annotation page, team mode, the caption
review, CVAT, the command line, the release. Nobody rebuilds a path from a source id: a
source's files are those of its unit.

Which units are current
-----------------------
* With ``units.tsv`` in the folder (the unit plan the workflow runs, read with
  :func:`microg4m.formats.unit_plan.read_plan`): exactly its units, in its order. A
  ``clips/<x>/`` folder of no unit of the plan is a leftover of an earlier plan: it is
  ignored, listed by :meth:`ResultsIndex.leftovers` and named in
  :meth:`ResultsIndex.problems`; so are the rows of a unit's manifest whose source the plan
  puts in another unit (a re-plan not yet run), and a unit of the plan whose manifest is
  not written yet.
* Without it (a folder made by the command line, or by an older run): every
  ``clips/*/manifest.tsv``, in folder-name order. A clip found in two manifests is a
  problem, named; the first is kept.

API
---
``ResultsIndex(root, max_age=0)`` (ValueError when ``root`` is not a folder; nothing else
is read before the first call; ``max_age``: see Freshness)::

    idx.root                     # the folder, resolved
    idx.planned()                # bool: units.tsv is there
    idx.units()                  # {unit: [source ids]}: the current units (plan order; else
                                 #   folder order, the sources of the unit's trim status and
                                 #   manifest: failed sources and sources without clips too)
    idx.unit_of(source_id)       # its unit (KeyError for a source of no current unit)
    idx.files(unit)              # UnitFiles: every per-unit path of the layout (there or not)
    idx.final_tracks(unit)       # corrected/{unit}.csv when written, else tracks/{unit}.csv
    idx.clips()                  # {clip_id: Clip}: every clip of the current manifests,
                                 #   trimmed or dropped, in clip-id order
    idx.clip(clip_id)            # Clip; KeyError for an id that is no clip (O(1))
    idx.get(clip_id)             # Clip or None
    idx.clip_files(clip_id)      # ClipFiles: its mp4, MOT text, CVAT XML, preview, frames
    idx.track_rows(clip_id)      # float32 array (n, 6): frame, person, x1, y1, x2, y2 (pixels),
                                 #   one row per box of the unit's final tracks (ValueError:
                                 #   the file is unreadable, naming it)
    idx.persons(clip_id)         # [person ids with a box], ascending (kept per unit: no work per call)
    idx.boxes(clip_id)           # {frame: [(person, x1, y1, x2, y2), ...]} (2 decimals)
    idx.problems()               # [message]: what was ignored, and why
    idx.stamps(kind)             # ((unit, stamp), ...) of one per-unit file (a UnitFiles field,
                                 #   e.g. "vqa_drafts") of every current unit, as fresh as view()
    idx.leftovers()              # [Path]: clips/<x>/ folders of no current unit
    idx.version                  # int, goes up whenever the clips changed (a cache key)
    idx.view()                   # View: one freshness check of the whole folder, then no stat:
    view.token                   #   int, goes up whenever the clips (manifests, decisions, trim
                                 #   status) or any unit's final tracks changed (a cache key)
    view.clips                   #   = idx.clips() (the same dict object while nothing changed)
    view.persons(clip_id)        #   its persons as of that check ([] for no clip; reads a unit's
                                 #   tracks the first time one of its clips is asked for)

``Clip`` (frozen): ``clip_id, unit, source_id, clip_type`` (``r``/``m``), ``seq, frames,
width, height, path`` (the mp4), ``status`` (trim's: ``ok`` or ``dropped``),
``trim_reason``, ``keep`` (the filter's decision: True, False, or None when the unit has
no decision for it yet) and ``reason`` (the filter's); ``clip.kept``: trimmed and kept.

Freshness
---------
Read once, then refreshed by stamp (modification time, size, inode) when a file it was
read from changes. A unit's tables are read again only when one of them changed; a unit's
tracks are read when first asked for (per unit, lazily) and again when the file changed;
its persons per clip are worked out then, once. Thread-safe.

* A call on one clip (``clip``, ``get``, ``clip_files``, ``track_rows``, ``persons``,
  ``boxes``) stats the plan and the ``clips/`` folder, the clip's unit's manifest,
  decisions and trim status, and that unit's final tracks: a few stats whatever the number
  of clips or units, and always exact: a changed file is seen by the next call.
* A call on the whole folder (``clips``, ``units``, ``problems``, ``view``, and ``get`` of
  an id the index does not know) must look at every unit's files (five per unit: 5,000
  stats at 1,000 units, about 10 ms). With ``max_age=0`` (the default: the command line,
  the release, the tests) it does so on every call. A long-running server (the annotation
  pages: ``max_age`` = 1 s) cannot pay that per request, so it looks at every unit at most
  once per ``max_age`` seconds, and on every call stats only the plan and five folders:
  ``clips/``, ``filter/``, ``tracks/``, ``corrected/`` and ``vqa_drafts/``. The workflow
  writes every output atomically (a temporary file renamed over the old one) and Snakemake
  removes a job's outputs before it runs it again; both change the folder's stamp, so a
  re-run's new decisions, tracks and corrections are seen by the next call. A folder
  changed less than :data:`RACY_SECONDS` before a look may change again within the same
  tick of the file system's clock without a new stamp, so its stamp is not trusted: the
  next call looks at every unit again (as git treats a "racily clean" file). What the
  folder stamps do not show (a file edited in place, a unit's manifest rewritten under
  ``clips/<unit>/``: its new clips have no decision, so they are not on the pages until the
  filter's decisions are written) is seen at most ``max_age`` seconds later: that is the
  staleness bound. Why this and not a stat of every file per call: its cost does not grow
  with the units; not inotify: it is Linux only and blind on the network file systems of
  clusters.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from microg4m.common import faults
from microg4m.formats.decisions import read_decisions
from microg4m.formats.manifest import read_manifest
from microg4m.formats.records import read_records
from microg4m.formats.tracks import read_tracks
from microg4m.formats.unit_plan import FILE as PLAN, read_plan

WATCHED = ("clips", "filter", "tracks", "corrected", "vqa_drafts")  # folders whose stamps every call looks at
RACY_SECONDS = 2.0  # a folder changed this recently is looked into again (coarse clocks: ext3, FAT, some NFS)
CLIP_ID = re.compile(r"^[A-Za-z0-9_-]+$")
NO_ROWS = np.zeros((0, 6), np.float32)


@dataclass(frozen=True)
class Clip:
    clip_id: str
    unit: str
    source_id: str
    clip_type: str  # r / m (the actions CSV's movie_or_real)
    seq: int
    frames: int
    width: int
    height: int
    path: Path  # the mp4: clips/{unit}/{clip_id}.mp4
    status: str  # trim's: ok / dropped
    trim_reason: str
    keep: bool | None  # the filter's decision (None: none yet)
    reason: str  # the filter's reason ("" when none)

    @property
    def kept(self) -> bool:
        """Trimmed (90 frames) and kept by the filter."""
        return self.status == "ok" and self.keep is True


@dataclass(frozen=True)
class UnitFiles:
    """Every per-unit file of the layout (docs/formats.md), whether it is there or not."""

    unit: str
    clip_dir: Path  # clips/{unit}/: the mp4s, manifest.tsv, status.tsv
    manifest: Path
    status: Path
    download: Path
    detections: Path
    scenes: Path
    decisions: Path
    motion: Path
    quality: Path  # the quality scores
    tracks: Path  # the tracker's
    corrected: Path  # the tracks with the CVAT corrections applied
    corrections_report: Path
    mot_dir: Path
    cvat_dir: Path
    contact_sheet: Path
    previews_dir: Path
    frames_done: Path
    frames_dir: Path  # the frames stage's folder of the unit: frames_dir/<clip>/<clip>_%06d.jpg
    signatures: Path
    vqa_drafts: Path
    har_vlm: Path  # the VLM baseline's answers (rule har_vlm): the labelling page's suggestions

    @property
    def final_tracks(self) -> Path:
        """``corrected/{unit}.csv`` when written (what export and ledger read), else the tracker's."""
        return self.corrected if self.corrected.is_file() else self.tracks


def unit_files(root: Path, unit: str) -> UnitFiles:
    """The layout of one unit's files under the results folder ``root``."""
    r = Path(root)
    return UnitFiles(
        unit=unit, clip_dir=r / "clips" / unit, manifest=r / "clips" / unit / "manifest.tsv",
        status=r / "clips" / unit / "status.tsv", download=r / "download" / f"{unit}.tsv",
        detections=r / "detections" / f"{unit}.parquet", scenes=r / "scenes" / f"{unit}.tsv",
        decisions=r / "filter" / f"{unit}.tsv", motion=r / "motion" / f"{unit}.tsv",
        quality=r / "quality" / f"{unit}.tsv", tracks=r / "tracks" / f"{unit}.csv", corrected=r / "corrected" / f"{unit}.csv",
        corrections_report=r / "corrected" / f"{unit}.tsv", mot_dir=r / "mot" / unit, cvat_dir=r / "cvat" / unit,
        contact_sheet=r / "previews" / f"{unit}.png", previews_dir=r / "previews" / unit,
        frames_done=r / "frames" / f"{unit}.tsv", frames_dir=r / "frames" / unit, signatures=r / "signatures" / f"{unit}.parquet",
        vqa_drafts=r / "vqa_drafts" / f"{unit}.json", har_vlm=r / "har_vlm" / f"{unit}.json",
    )


@dataclass(frozen=True)
class ClipFiles:
    """The files of one clip (there or not): the mp4, the track files made from the final
    boxes, the preview with boxes (``track.previews``) and the JPEG frames."""

    mp4: Path
    mot: Path
    cvat: Path
    preview: Path
    frames_dir: Path


def _stat(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


@dataclass
class _Part:
    """One unit as read from its manifest and decisions."""

    stamp: tuple
    sources: list[str]
    clips: dict[str, Clip]
    problems: list[str]
    has_manifest: bool


@dataclass
class _Tracks:
    stamp: tuple
    rows: dict[str, np.ndarray]
    persons: dict[str, list[int]]  # clip -> its person ids, ascending
    problems: list[str]


class View:
    """The folder as of one freshness check (see the module's docstring)."""

    def __init__(self, index: "ResultsIndex", token: int, clips: dict[str, Clip]):
        self._index, self.token, self.clips = index, token, clips

    def persons(self, clip_id: str) -> list[int]:
        clip = self.clips.get(clip_id)
        return [] if clip is None else self._index._persons_as_checked(clip)


class ResultsIndex:
    def __init__(self, root: str | os.PathLike, max_age: float = 0.0):
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ValueError(f"results folder {root} not found")
        if not max_age >= 0:
            raise ValueError(f"max_age must be >= 0 seconds, got {max_age!r}")
        self.max_age = float(max_age)
        self._lock = threading.RLock()
        self._files: dict[str, UnitFiles] = {}
        self._watched: tuple | None = None  # the WATCHED folders' stamps at the last look (None: not trusted)
        self._looked = float("-inf")  # when (time.monotonic) every unit was last looked at
        self._top: tuple | None = None  # stamps of units.tsv and clips/
        self._plan: dict[str, list[str]] | None = None
        self._names: list[str] = []  # the current units, in order
        self._leftovers: list[Path] = []
        self._top_problems: list[str] = []
        self._parts: dict[str, _Part] = {}
        self._tracks: dict[str, _Tracks] = {}
        self._by_clip: dict[str, Clip] = {}
        self._merge_problems: list[str] = []
        self._sorted: dict[str, Clip] | None = None
        self.version = 0
        self._token = 0  # goes up with version and whenever a unit's tracks were read again
        self._stamps: dict[str, tuple] = {}  # stamps(kind): ((self._looked, version) when made, stamps)

    # ------------------------------------------------------------ units
    def planned(self) -> bool:
        with self._lock:
            self._fresh_top()
            return self._plan is not None

    def units(self) -> dict[str, list[str]]:
        with self._lock:
            self._fresh_all()
            return {u: list(self._parts[u].sources) for u in self._names
                    if self._plan is not None or self._parts[u].has_manifest}

    def unit_of(self, source_id: str) -> str:
        for unit, sources in self.units().items():
            if source_id in sources:
                return unit
        raise KeyError(f"{source_id!r} is no source of {self.root} (units: {', '.join(self.units()) or 'none'})")

    def files(self, unit: str) -> UnitFiles:
        got = self._files.get(unit)
        if got is None:  # made once per unit: a look at every unit costs its stats, not 19 paths a unit
            got = self._files[unit] = unit_files(self.root, unit)
        return got

    def final_tracks(self, unit: str) -> Path:
        return self.files(unit).final_tracks

    def leftovers(self) -> list[Path]:
        with self._lock:
            self._fresh_top()
            return list(self._leftovers)

    # ------------------------------------------------------------ clips
    def clips(self) -> dict[str, Clip]:
        with self._lock:
            self._fresh_all()
            return self._clips_sorted()

    def _clips_sorted(self) -> dict[str, Clip]:
        if self._sorted is None:
            self._sorted = dict(sorted(self._by_clip.items()))
        return self._sorted

    def get(self, clip_id: str) -> Clip | None:
        if not isinstance(clip_id, str):
            return None
        with self._lock:
            self._fresh_top()
            clip = self._by_clip.get(clip_id)
            if clip is not None and self._fresh_unit(clip.unit):
                self._merge()
                clip = self._by_clip.get(clip_id)
            if clip is None:  # new since the last look, or no clip: look at every unit
                self._fresh_all()
                clip = self._by_clip.get(clip_id)
            return clip

    def clip(self, clip_id: str) -> Clip:
        clip = self.get(clip_id)
        if clip is None:
            raise KeyError(f"{clip_id!r} is no clip of {self.root}")
        return clip

    def clip_files(self, clip_id: str) -> ClipFiles:
        c = self.clip(clip_id)
        f = self.files(c.unit)
        return ClipFiles(mp4=c.path, mot=f.mot_dir / f"{c.clip_id}.txt", cvat=f.cvat_dir / f"{c.clip_id}.xml",
                         preview=f.previews_dir / f"{c.clip_id}.mp4", frames_dir=f.frames_dir / c.clip_id)

    def problems(self) -> list[str]:
        with self._lock:
            self._fresh_all()
            out = list(self._top_problems)
            for u in self._names:
                out += self._parts[u].problems
            out += self._merge_problems
            for u in self._names:
                if u in self._tracks:
                    out += self._tracks[u].problems
            return out

    # ------------------------------------------------------------ boxes
    def track_rows(self, clip_id: str) -> np.ndarray:
        clip = self.clip(clip_id)
        with self._lock:
            tracks = self._fresh_tracks(clip.unit)
        return tracks.rows.get(clip.clip_id, NO_ROWS)

    def persons(self, clip_id: str) -> list[int]:
        clip = self.clip(clip_id)
        with self._lock:
            return list(self._fresh_tracks(clip.unit).persons.get(clip.clip_id, ()))

    def view(self) -> View:
        with self._lock:
            self._fresh_all()
            return View(self, self._token, self._clips_sorted())

    def stamps(self, kind: str) -> tuple:
        """``((unit, stamp or None), ...)`` of one per-unit file of every current unit (``kind``:
        a field of UnitFiles, e.g. ``"vqa_drafts"``), as fresh as :meth:`view`: a cache key
        for a reader of those files."""
        with self._lock:
            self._fresh_all()
            got = self._stamps.get(kind)
            if got is None or got[0] != (self._looked, self.version):
                got = self._stamps[kind] = ((self._looked, self.version), tuple(
                    (u, _stat(getattr(self.files(u), kind))) for u in self._names))
            return got[1]

    def _persons_as_checked(self, clip: Clip) -> list[int]:
        with self._lock:
            tracks = self._tracks.get(clip.unit)
            if tracks is None:  # first asked for: read now (a later change is the next check's)
                tracks = self._fresh_tracks(clip.unit)
            return list(tracks.persons.get(clip.clip_id, ()))

    def boxes(self, clip_id: str) -> dict[int, list[tuple]]:
        out: dict[int, list[tuple]] = {}
        for f, p, *box in self.track_rows(clip_id).tolist():
            out.setdefault(int(f), []).append((int(p), *(round(v, 2) for v in box)))
        return out

    # ------------------------------------------------------------ freshness (under the lock)
    def _fresh_top(self) -> None:
        plan_path, clips_dir = self.root / PLAN, self.root / "clips"
        stamp = (_stat(plan_path), _stat(clips_dir))
        if stamp == self._top:
            return
        plan = read_plan(plan_path) if stamp[0] is not None else None
        folders = sorted(p.name for p in clips_dir.iterdir() if p.is_dir()) if clips_dir.is_dir() else []
        problems: list[str] = []
        if plan is not None:
            names = list(plan)
            self._leftovers = [clips_dir / f for f in folders if f not in plan]
            problems += [f"{p}: a folder of no unit of {plan_path} (left by an earlier plan); ignored"
                         for p in self._leftovers]
        else:
            names = folders
            self._leftovers = []
        if plan != self._plan:  # a unit's part was checked against the plan it was read under
            self._parts = {}
        self._plan, self._names, self._top_problems, self._top = plan, names, problems, stamp
        self._parts = {u: p for u, p in self._parts.items() if u in names}
        self._tracks = {u: t for u, t in self._tracks.items() if u in names}
        for u in names:
            self._fresh_unit(u)
        self._merge()

    def _fresh_all(self) -> None:
        """Every unit's tables and read tracks checked, or (``max_age``) only the WATCHED
        folders when every unit was looked at less than ``max_age`` seconds ago and none of
        them has changed since (nor shortly before: RACY_SECONDS)."""
        self._fresh_top()
        watched = tuple(_stat(self.root / d) for d in WATCHED)
        now = time.monotonic()
        if self.max_age and watched == self._watched and now - self._looked < self.max_age:
            return
        if any([self._fresh_unit(u) for u in self._names]):
            self._merge()
        for u in list(self._tracks):
            if self._tracks[u].stamp != self._tracks_stamp(u):
                del self._tracks[u]  # read again when next asked for
                self._token += 1
        racy = time.time_ns() - int(RACY_SECONDS * 1e9)
        self._watched = None if any(st is not None and st[0] >= racy for st in watched) else watched
        self._looked = now

    def _fresh_unit(self, unit: str) -> bool:
        """Re-read a unit when its manifest, decisions or trim status changed; True when it did."""
        f = self.files(unit)
        stamp = (_stat(f.manifest), _stat(f.decisions), _stat(f.status))
        part = self._parts.get(unit)
        if part is not None and part.stamp == stamp:
            return False
        self._parts[unit] = self._read_unit(unit, f, stamp)
        return True

    def _read_unit(self, unit: str, f: UnitFiles, stamp: tuple) -> _Part:
        planned = self._plan.get(unit) if self._plan is not None else None
        sources = list(planned) if planned is not None else []
        if stamp[0] is None:
            problems = [f"{f.manifest}: not written yet (unit {unit} of {self.root / PLAN})"] if planned else []
            return _Part(stamp, sources, {}, problems, False)
        try:
            man = read_manifest(f.manifest)
        except (OSError, KeyError, ValueError) as exc:
            faults.check(exc, f.manifest)  # no space, EIO, EACCES ...: the job fails, never a bad input
            return _Part(stamp, sources, {}, [f"{f.manifest}: unreadable manifest ({type(exc).__name__}: {exc})"],
                         True)
        problems: list[str] = []
        if planned is None and stamp[2] is not None:  # without a plan: every source trim saw, clips or not
            try:
                sources = list(dict.fromkeys(r["source_id"] for r in read_records(f.status)))
            except (OSError, KeyError, ValueError) as exc:
                faults.check(exc, f.status)  # no space, EIO, EACCES ...: the job fails, never a bad input
                problems.append(f"{f.status}: unreadable trim status ({type(exc).__name__}: {exc})")
        decided: dict[str, tuple[bool, str]] = {}
        if stamp[1] is None:
            if (man["status"] == "ok").any():
                problems.append(f"{f.decisions}: no filter decisions yet; the clips of unit {unit} have none")
        else:
            try:
                dec = read_decisions(f.decisions)
            except (OSError, ValueError) as exc:
                faults.check(exc, f.decisions)  # no space, EIO, EACCES ...: the job fails, never a bad input
                problems.append(f"{f.decisions}: unreadable filter decisions ({type(exc).__name__}: {exc})")
            else:
                reasons = dec["reason"] if "reason" in dec else [""] * len(dec)
                for cid, k, why in zip(dec["clip_id"], dec["keep"], reasons):
                    if cid in decided:
                        problems.append(f"{f.decisions}: {cid}: a second decision; the first kept")
                    else:
                        decided[cid] = (k.strip() == "1", why.strip())
        clips: dict[str, Clip] = {}
        for r in man.itertuples(index=False):
            if planned is not None and r.source_id not in planned:
                problems.append(f"{f.manifest}: {r.clip_id}: source {r.source_id!r} is not of unit {unit} in "
                                f"{self.root / PLAN} (a re-plan not run yet); ignored")
                continue
            if planned is None and r.source_id not in sources:
                sources.append(r.source_id)
            if not CLIP_ID.match(r.clip_id):
                problems.append(f"{f.manifest}: clip id {r.clip_id!r} has characters outside [A-Za-z0-9_-]; ignored")
                continue
            if r.clip_id in clips:
                problems.append(f"{f.manifest}: {r.clip_id}: in two rows; the first kept")
                continue
            keep, why = decided.get(r.clip_id, (None, ""))
            clips[r.clip_id] = Clip(r.clip_id, unit, r.source_id, r.clip_type, int(r.seq), int(r.frames),
                                    int(r.width), int(r.height), f.clip_dir / f"{r.clip_id}.mp4", r.status,
                                    r.reason, keep, why)
        return _Part(stamp, sources, clips, problems, True)

    def _merge(self) -> None:
        """The clip map of the current units, in unit order; a clip in two units: the first kept."""
        by_clip: dict[str, Clip] = {}
        problems = []
        for u in self._names:
            for cid, clip in self._parts[u].clips.items():
                first = by_clip.setdefault(cid, clip)
                if first is not clip:
                    problems.append(f"{self.files(u).manifest}: {cid} is also a clip of unit {first.unit} "
                                    f"({self.files(first.unit).manifest}); the first kept")
        self._by_clip, self._merge_problems, self._sorted = by_clip, problems, None
        self.version += 1
        self._token += 1

    def _tracks_stamp(self, unit: str) -> tuple:
        path = self.files(unit).final_tracks
        return path, _stat(path)

    def _fresh_tracks(self, unit: str) -> _Tracks:
        stamp = self._tracks_stamp(unit)
        cached = self._tracks.get(unit)
        if cached is not None and cached.stamp == stamp:
            return cached
        path, f = stamp[0], self.files(unit)
        if stamp[1] is None:
            kept = any(c.kept for c in self._parts[unit].clips.values()) if unit in self._parts else False
            problems = [f"{f.tracks}: not written yet; the kept clips of unit {unit} show no person"] if kept else []
            tracks = _Tracks(stamp, {}, {}, problems)
        else:
            problems: list[str] = []
            df = read_tracks(path, on_problem=lambda message: problems.append(f"{path}: {message}"))
            arr = df[["frame_id", "person_id", "xmin", "ymin", "xmax", "ymax"]].to_numpy(np.float32)
            rows = {cid: arr[idx] for cid, idx in df.groupby("video_id").indices.items()}
            persons = {cid: np.unique(r[:, 1]).astype(int).tolist() for cid, r in rows.items()}
            tracks = _Tracks(stamp, rows, persons, problems)
        if cached is not None:  # read again: what was shown may have changed
            self._token += 1
        self._tracks[unit] = tracks
        return tracks
