"""The export's ``clips.csv``: one row per clip that trim accepted (kept or rejected), with
its split (empty when not in the dataset), the filter's reason and its quality scores as
the quality tables wrote them (microg4m.formats.quality; empty where a unit's table was
missing or unreadable). Written by the export stage, read by the release (its clips table
carries the scores of the released clips)."""

from __future__ import annotations

import os

import pandas as pd

from microg4m.formats.quality import COLUMNS as QUALITY_COLUMNS
from microg4m.formats.quality import COUNTS, typed_scores  # noqa: F401 (COUNTS: the integer scores)

SCORES = QUALITY_COLUMNS[1:]  # transitions ... clipped
COLUMNS = ["clip_id", "source_id", "clip_type", "kept", "split", "reason", *SCORES]


def read_clips_table(path: str | os.PathLike) -> pd.DataFrame:
    """``clips.csv`` with ``kept`` as bool, the counts as nullable ints, the numbers as
    floats (NaN where empty) and ``camera`` as text (empty where unscored); ValueError
    naming the file, the clip and what is wrong."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not the export's clips table (missing columns {missing})")
    if df["clip_id"].duplicated().any():
        raise ValueError(f"{path}: clip {df.loc[df['clip_id'].duplicated(), 'clip_id'].iloc[0]} is listed twice")
    df = typed_scores(df, path, blanks=True)
    df["kept"] = df["kept"].map({"1": True, "0": False})
    if df["kept"].isna().any():
        raise ValueError(f"{path}: kept must be 1 or 0")
    return df[COLUMNS]
