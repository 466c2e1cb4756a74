"""The detection cache, ``detections/{unit}.parquet``: its columns, schema and coverage metadata
(written by the detect stage, read by filter and track)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from microg4m.common import faults


PERSON = 0


COLUMNS = ["clip_id", "frame", "x1", "y1", "x2", "y2", "conf", "cls"]


SCHEMA = pa.schema(
    [("clip_id", pa.string()), ("frame", pa.int32())]
    + [(c, pa.float32()) for c in ("x1", "y1", "x2", "y2", "conf")]
    + [("cls", pa.int16())]
)


COVERAGE = "microg4m.coverage"  # parquet metadata: clip -> frames detected (1..n), when not all


def read_coverage(path: str | os.PathLike, clips) -> dict[str, int]:
    """Frames detected per clip (1..n): the parquet's coverage metadata; a cache written
    before it existed covers every frame (``clips``: clip id -> frames)."""
    meta = pq.ParquetFile(path).metadata.metadata or {}  # the file's key-value metadata
    if COVERAGE.encode() not in meta:
        return dict(clips)
    coverage = json.loads(meta[COVERAGE.encode()])
    return {clip: int(coverage.get(clip, frames)) for clip, frames in dict(clips).items()}


def read_detections(path: str | os.PathLike) -> pd.DataFrame:
    """The detection cache as a DataFrame with the documented columns and dtypes."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: detection cache not found (run the detect stage)")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
        raise ValueError(f"{path}: not a readable parquet file ({exc})") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: detection cache lacks columns {missing} (written by an older "
                         "microg4m? re-run detect: snakemake --forcerun detect)")
    return table.select(COLUMNS).to_pandas()
