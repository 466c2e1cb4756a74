"""The export's AVA tables, read back: ``ava_format_with_header.csv`` (the labelled rows,
``video_id,frame_stamp,xmin,ymin,xmax,ymax,action_id,person_id``; the split files have the
same columns without a header) and ``boxes.csv`` (every person's keyframe box before
labels). The export (stages/export.py) writes them; the release reads them here.

Coordinates are read so that each float is the one the file wrote (``repr`` gives the
file's text back: ``0.99``, ``1.0``).
"""

from __future__ import annotations

import os

import pandas as pd

COLUMNS = ["video_id", "frame_stamp", "xmin", "ymin", "xmax", "ymax", "action_id", "person_id"]
BOX_COLUMNS = ["video_id", "frame_stamp", "xmin", "ymin", "xmax", "ymax", "person_id"]
_TYPES = {"video_id": str, "frame_stamp": "int64", "xmin": "float64", "ymin": "float64", "xmax": "float64",
          "ymax": "float64", "action_id": "int64", "person_id": "int64"}


def _read(path, columns: list[str], header: bool) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, header=0 if header else None, names=None if header else columns,
                         dtype={"video_id": str}, keep_default_na=False, float_precision="round_trip")
    except pd.errors.EmptyDataError:
        df = pd.DataFrame(columns=columns)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"{path}: unreadable AVA table ({type(exc).__name__}: {exc})") from None
    if list(df.columns) != columns:
        raise ValueError(f"{path}: columns {','.join(map(str, df.columns))}, expected {','.join(columns)}")
    try:
        return df.astype({c: _TYPES[c] for c in columns})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: a cell is not of its column's type ({exc})") from None


def read_ava(path: str | os.PathLike, header: bool = True) -> pd.DataFrame:
    """The rows of an AVA CSV (``header=False`` for the split files), in file order."""
    return _read(path, COLUMNS, header)


def read_boxes(path: str | os.PathLike) -> pd.DataFrame:
    """The keyframe boxes of ``boxes.csv``, in file order."""
    return _read(path, BOX_COLUMNS, True)
