"""Detections of every frame a detect job ran on, kept for its re-runs.

detect stops early on clips the filter must reject (microg4m.formats.rejection), so its output
depends on the filter's settings and a job runs again when they change. This cache keeps
what YOLO found in each frame, per source (one parquet file) and clip (by the clip
file's sha256, so a re-cut clip with other pixels is a new clip), under a key of
everything a box depends on and nothing else (microg4m.stages.detect.box_settings: the
model, runtime, precision, image size, decoder, hardware, libraries; not detect.conf,
whose boxes are filtered from those of the detector's own low threshold, nor the batch on
a CPU), so that the job runs YOLO only on frames it never ran on. Each clip's entry is
its first ``prefix`` frames (the frames run, in order).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from microg4m.common.atomic import atomic_path

SCHEMA = pa.schema([("clip_sha", pa.string()), ("frame", pa.int32())]
                   + [(c, pa.float32()) for c in ("x1", "y1", "x2", "y2", "conf")] + [("cls", pa.int16())])
PREFIX = b"microg4m.prefix"  # metadata: {clip sha256: frames run}
KEY_FILE = "key.json"  # what the folder's key was made of

Entry = dict  # frame (1-based) -> boxes (n, 6) float32


def key(**settings) -> str:
    """The cache folder of a detector and its settings (JSON-able values)."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class FrameCache:
    def __init__(self, folder: str | os.PathLike, settings: dict | None = None):
        """``folder``: the cache of one key; ``settings``: what the key was made of, kept
        beside the entries (``key.json``) to show what a folder holds."""
        self.folder = Path(folder)
        self.settings = settings

    def _path(self, source_id: str) -> Path:
        return self.folder / f"{source_id}.parquet"

    def load(self, source_id: str) -> dict[str, Entry]:
        """clip sha256 -> {frame: boxes} for the frames run before (empty if none, or unreadable)."""
        path = self._path(source_id)
        try:
            table = pq.read_table(path)
            prefix = json.loads(table.schema.metadata[PREFIX])
        except (OSError, KeyError, ValueError, TypeError, pa.ArrowException):
            return {}
        entries = {sha: {n: np.zeros((0, 6), np.float32) for n in range(1, k + 1)} for sha, k in prefix.items()}
        cols = table.to_pydict() if table.num_rows else None
        if cols:
            boxes = np.stack([np.asarray(cols[c], np.float32) for c in ("x1", "y1", "x2", "y2", "conf", "cls")], 1)
            shas, frames = cols["clip_sha"], cols["frame"]
            starts = {}
            for i, (sha, n) in enumerate(zip(shas, frames)):
                starts.setdefault((sha, n), [i, i])[1] = i + 1
            for (sha, n), (a, b) in starts.items():
                if sha in entries and n in entries[sha]:
                    entries[sha][n] = boxes[a:b]
        return entries

    def save(self, source_id: str, entries: dict[str, Entry]) -> None:
        """Write a source's entries (each clip's frames 1..k run; the rest is dropped)."""
        prefix, rows = {}, []
        for sha, frames in sorted(entries.items()):
            k = 0
            while k + 1 in frames:
                k += 1
            if k:
                prefix[sha] = k
                rows += [(sha, n, frames[n]) for n in range(1, k + 1) if len(frames[n])]
        boxes = np.concatenate([b for *_, b in rows]) if rows else np.zeros((0, 6), np.float32)
        table = pa.Table.from_arrays(
            [pa.array([s for s, _, b in rows for _ in range(len(b))], pa.string()),
             pa.array([n for _, n, b in rows for _ in range(len(b))], pa.int32())]
            + [pa.array(boxes[:, i], pa.float32()) for i in range(5)]
            + [pa.array(boxes[:, 5].astype(np.int16), pa.int16())],
            schema=SCHEMA.with_metadata({PREFIX: json.dumps(prefix, sort_keys=True)}))
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.settings is not None and not (self.folder / KEY_FILE).is_file():
            with atomic_path(self.folder / KEY_FILE) as tmp:
                tmp.write_text(json.dumps(self.settings, indent=1, sort_keys=True, default=str) + "\n")
        with atomic_path(self._path(source_id)) as tmp:
            pq.write_table(table, tmp)
