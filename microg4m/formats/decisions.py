"""The filter's decision table (``filter/{unit}.tsv``) and the screening file (clips excluded by hand)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd


def read_decisions(path: str | os.PathLike) -> pd.DataFrame:
    """A decision table written by run (``clip_id, person_share, cuts, keep, reason``), as strings."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = {"clip_id", "keep"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    return df


def kept_ids(decisions: pd.DataFrame) -> list[str]:
    """Clip ids with keep == 1, in table order."""
    return decisions.loc[decisions["keep"].str.strip() == "1", "clip_id"].tolist()


def read_screening(path: str | os.PathLike | None) -> set[str]:
    """Clip ids excluded by hand: one per line, ``#`` comments and blank lines ignored.

    ``None`` or a missing file means no exclusions.
    """
    if path is None or not Path(path).is_file():
        return set()
    ids = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            ids.add(line)
    return ids
