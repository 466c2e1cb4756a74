"""Read-only view of a run's results folder: the clips on the page and their boxes.

A clip is on the page when trim made it (status ok) and the filter kept it, or when the
filter rejected it as ``screened`` (so that an exclusion can be undone). Tables are
re-read when a file changes on disk (a re-run of the workflow).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from microg4m.formats.decisions import read_decisions
from microg4m.formats.manifest import read_manifest
from .errors import Refused

CLIP_ID = re.compile(r"^[A-Za-z0-9_-]+$")
TRACK_COLUMNS = ["frame_id", "person_id", "xmin", "ymin", "xmax", "ymax"]


@dataclass(frozen=True)
class Clip:
    clip_id: str
    source_id: str
    clip_type: str  # r / m (the actions CSV's movie_or_real)
    frames: int
    width: int
    height: int
    path: Path  # the mp4, inside the results folder
    kept: bool  # filter keep == 1 (False: rejected as screened)


class Results:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ValueError(f"results folder {root} not found")
        self._lock = threading.Lock()
        self._stamp: tuple | None = None
        self._clips: dict[str, Clip] = {}
        self._problems: list[str] = []
        self._boxes: dict[str, tuple[tuple, dict]] = {}  # source -> (stamp, clip -> track rows)
        self.clips()  # fail early on a folder without manifests

    # ------------------------------------------------------------ clips
    def _files(self) -> list[Path]:
        return sorted(self.root.glob("clips/*/manifest.tsv")) + sorted(self.root.glob("filter/*.tsv"))

    @staticmethod
    def _stamp_of(paths) -> tuple:
        out = []
        for p in paths:
            try:
                st = p.stat()
                out.append((str(p), st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((str(p), None, None))
        return tuple(out)

    def clips(self) -> dict[str, Clip]:
        """Clips on the page, by id, in clip-id order (reloaded when a table changed)."""
        with self._lock:
            stamp = self._stamp_of(self._files())
            if stamp != self._stamp:
                self._clips, self._problems = self._load()
                self._stamp = stamp
            return self._clips

    def problems(self) -> list[str]:
        self.clips()
        return list(self._problems)

    def _load(self) -> tuple[dict[str, Clip], list[str]]:
        manifests = sorted(self.root.glob("clips/*/manifest.tsv"))
        if not manifests:
            raise ValueError(f"{self.root}: no clips/*/manifest.tsv (not the results folder of a run?)")
        clips, problems = {}, []
        for mpath in manifests:
            src = mpath.parent.name
            dpath = self.root / "filter" / f"{src}.tsv"
            try:
                man = read_manifest(mpath)
            except (OSError, KeyError, ValueError) as exc:
                problems.append(f"{mpath}: unreadable manifest ({exc})")
                continue
            if not dpath.is_file():
                if (man["status"] == "ok").any():
                    problems.append(f"{dpath}: no filter decisions yet; clips of {src} not shown")
                continue
            try:
                dec = read_decisions(dpath)
            except (OSError, ValueError) as exc:
                problems.append(f"{dpath}: unreadable filter decisions ({exc})")
                continue
            reasons = dec["reason"] if "reason" in dec else pd.Series([""] * len(dec), index=dec.index)
            keep = {c: (k.strip() == "1", r.strip()) for c, k, r in zip(dec["clip_id"], dec["keep"], reasons)}
            for r in man.itertuples(index=False):
                k, reason = keep.get(r.clip_id, (False, ""))
                if r.status != "ok" or not CLIP_ID.match(r.clip_id) or not (k or reason == "screened"):
                    continue
                clips[r.clip_id] = Clip(r.clip_id, r.source_id, r.clip_type, int(r.frames), int(r.width),
                                        int(r.height), mpath.parent / f"{r.clip_id}.mp4", k)
        return dict(sorted(clips.items())), problems

    def clip(self, clip_id: str) -> Clip:
        """The clip, or :class:`Refused` (404) for any id that is not a clip on the page."""
        clips = self.clips()
        if not isinstance(clip_id, str) or clip_id not in clips:
            raise Refused(404, f"unknown clip {clip_id!r} (not a kept clip of {self.root})")
        return clips[clip_id]

    # ------------------------------------------------------------ boxes
    def _rows(self, clip_id: str) -> np.ndarray:
        """Track rows of a clip: ``frame, person, x1, y1, x2, y2`` (float32, one per box)."""
        clip = self.clip(clip_id)
        path = self.root / "corrected" / f"{clip.source_id}.csv"  # with the CVAT corrections applied
        if not path.is_file():
            path = self.root / "tracks" / f"{clip.source_id}.csv"
        stamp = self._stamp_of([path])
        with self._lock:
            cached = self._boxes.get(clip.source_id)
            if cached is None or cached[0] != stamp:
                cached = (stamp, self._read_tracks(path))
                self._boxes[clip.source_id] = cached
        return cached[1].get(clip_id, np.zeros((0, 6), np.float32))

    @staticmethod
    def _read_tracks(path: Path) -> dict[str, np.ndarray]:
        if not path.is_file():
            return {}
        try:
            df = pd.read_csv(path, dtype={"video_id": str}, keep_default_na=False)
            num = df[TRACK_COLUMNS].apply(pd.to_numeric, errors="coerce")
        except (OSError, ValueError, KeyError, pd.errors.ParserError) as exc:
            raise Refused(500, f"{path}: unreadable tracks ({exc})") from None
        ok = num.notna().all(axis=1) & (num["frame_id"] >= 1) & (num["person_id"] >= 1)
        arr = num[ok].to_numpy(np.float32)
        return {vid: arr[idx] for vid, idx in df[ok].groupby("video_id").indices.items()}

    def boxes(self, clip_id: str) -> dict[int, list[tuple]]:
        """Frame (1-based) -> ``[(person_id, x1, y1, x2, y2), ...]`` in pixels (2 decimals)."""
        out: dict[int, list[tuple]] = {}
        for f, p, *box in self._rows(clip_id).tolist():
            out.setdefault(int(f), []).append((int(p), *(round(v, 2) for v in box)))
        return out

    def persons(self, clip_id: str) -> list[int]:
        """Person ids with at least one box in the clip, ascending."""
        return sorted(int(p) for p in np.unique(self._rows(clip_id)[:, 1]))
