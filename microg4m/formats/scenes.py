"""The scene cuts table, ``scenes/{unit}.tsv`` (``clip_id, cuts``)."""

from __future__ import annotations

import os

import pandas as pd


COLUMNS = ["clip_id", "cuts"]


def format_cuts(cuts: list[int]) -> str:
    return ";".join(str(c) for c in cuts)


def parse_cuts(text) -> list[int]:
    """Inverse of format_cuts; empty/NaN -> []."""
    if text is None or (isinstance(text, float) and text != text) or str(text).strip() == "":
        return []
    return [int(x) for x in str(text).split(";")]


def read_scenes(path: str | os.PathLike) -> pd.DataFrame:
    """The scenes table with ``cuts`` as lists of ints."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: scenes table lacks columns {missing}")
    df["cuts"] = df["cuts"].map(parse_cuts)
    return df[COLUMNS]
