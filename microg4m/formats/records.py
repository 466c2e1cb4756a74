"""The download records, ``downloads/{unit}.tsv``: one status record per source
(written by download, read by trim, ledger, provenance and the VQA drafts)."""

from __future__ import annotations

import os

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
