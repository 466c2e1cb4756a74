"""The motion table, ``motion/{unit}.tsv`` (``clip_id, score, score_norm, level``)."""

from __future__ import annotations

import os

import pandas as pd


COLUMNS = ["clip_id", "score", "score_norm", "level"]


def read_motion(path: str | os.PathLike) -> dict[str, str]:
    """clip_id -> level from a ``motion/{unit}.tsv``."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = set(COLUMNS) - set(df.columns)
    if missing:
        raise ValueError(f"{path}: not a motion table (missing columns {sorted(missing)})")
    bad = set(df["level"]) - {"low", "high"}
    if bad:
        raise ValueError(f"{path}: unknown motion levels {sorted(bad)}")
    return dict(zip(df["clip_id"], df["level"]))
