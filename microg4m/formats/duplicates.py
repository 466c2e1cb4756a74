"""The near-duplicate tables, ``duplicates/pairs.tsv`` and the contamination table
(written by the duplicates stage, read by its contact sheets and the export)."""

from __future__ import annotations

import os

import pandas as pd


PAIR_COLUMNS = ["clip_a", "clip_b", "source_a", "source_b", "similarity", "offset_s", "mirrored", "overlap_s"]


CONTAMINATION_COLUMNS = ["clip_id", "source_id", "reference_clip", "reference_set", "similarity", "offset_s",
                         "mirrored", "overlap_s"]


def read_pairs(path: str | os.PathLike) -> pd.DataFrame:
    """A pairs table written by :func:`run`."""
    df = pd.read_csv(path, sep="\t", dtype={"clip_a": str, "clip_b": str, "source_a": str, "source_b": str},
                     keep_default_na=False)
    missing = [c for c in PAIR_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not a duplicates table (missing column(s) {', '.join(missing)})")
    return df[PAIR_COLUMNS].astype({"similarity": float, "offset_s": float, "overlap_s": float}).assign(
        mirrored=df["mirrored"].astype(str).str.lower().isin(["true", "1"]))
