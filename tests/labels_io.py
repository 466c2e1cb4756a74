"""Label-map and actions-table writers the tests check the shipped files with (the package
only reads them: annotations/label_map.pbtxt and annotations/actions_table.csv are edited by hand)."""

from __future__ import annotations

import os

import pandas as pd

from microg4m.common.atomic import write_csv, write_text
from microg4m.formats.labels import TABLE_COLUMNS, LabelError, format_label_map


def write_label_map(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a label map; byte-identical to the released file when given its table."""
    write_text(path, format_label_map(df))


def write_actions_table(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """``id,name,label_type`` CSV (names with commas quoted), in label-map order."""
    write_csv(path, df[TABLE_COLUMNS])


def read_actions_table(path: str | os.PathLike) -> pd.DataFrame:
    """The machine-readable actions table written by :func:`write_actions_table`."""
    try:
        df = pd.read_csv(path, dtype={"id": int, "name": str, "label_type": str}, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise LabelError(f"{path}: cannot read actions table ({exc})") from None
    if list(df.columns) != TABLE_COLUMNS:
        raise LabelError(f"{path}: columns {list(df.columns)}, expected {TABLE_COLUMNS}")
    return df
