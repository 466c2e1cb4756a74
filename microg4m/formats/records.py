"""The download records, ``downloads/{unit}.tsv``: one status record per source
(written by download, read by trim, ledger, provenance and the VQA drafts); and the
record kept beside each downloaded video, ``download/videos/{source_id}.record.json``
(``{"format": ..., "record": {...}}``: the facts its first run learnt; read by download
and, for a source's length, by the unit plan)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from microg4m.formats.provenance import PROVENANCE_COLUMNS


RECORD_COLUMNS = ["source_id", "status", "reason", "path", "clip_type", "url", "title",
                  "duration", "width", "height", "fps", "attempts", "reason_class", "advice",
                  *PROVENANCE_COLUMNS]


def read_records(path: str | os.PathLike) -> list[dict]:
    """The status records of a download table (empty cells become None)."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    return [{k: (v if v != "" else None) for k, v in row.items()} for row in df.to_dict("records")]


def records_frame(downloads) -> pd.DataFrame:
    """Every record of the download tables (``download/{unit}.tsv``), provenance included,
    in the order given; empty cells are empty strings."""
    rows = [rec for path in downloads for rec in read_records(path)]
    return pd.DataFrame(rows, columns=RECORD_COLUMNS).fillna("")


def record_file(video_dir: str | os.PathLike, source_id: str) -> Path:
    """The record kept beside the downloaded video of ``source_id``."""
    return Path(video_dir) / f"{source_id}.record.json"


def read_saved(video_dir: str | os.PathLike, source_id: str) -> dict | None:
    """``{"format": ..., "record": {...}}`` of ``source_id``'s video; None when there is
    none or it cannot be read (then the download is made again)."""
    try:
        saved = json.loads(record_file(video_dir, source_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return saved if isinstance(saved, dict) and isinstance(saved.get("record"), dict) else None
