"""Signature tables, ``signatures/{unit}.parquet`` (and reference sets): perceptual hashes of
frames sampled by time (written by the signatures stage, read by duplicates)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd


COLUMNS = ["clip_id", "source_id", "t_s", "hash", "mirror", "informative"]


def read_signatures(path: str | os.PathLike) -> pd.DataFrame:
    """A signature table (this stage's output, or a reference set's); checked."""
    df = pd.read_parquet(path)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not a signature table (missing column(s) {', '.join(missing)})")
    return df[COLUMNS].astype({"clip_id": str, "source_id": str, "hash": np.int64, "mirror": np.int64,
                               "informative": bool})
