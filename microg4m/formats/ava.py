"""AVA-format CSVs: the ground truth the export writes and the detections a trainer writes.

Both have the AVA columns ``video_id, frame_stamp, x1, y1, x2, y2, action_id`` and an
eighth: ``person_id`` in the ground truth (``ava_{train,val,test}*.csv``, no header; the
export's ``ava_format_with_header.csv`` has one), ``score`` in detections (PySlowFast's
``detections_*.csv``, whose stamps are zero-padded, ``0052``). Boxes are normalised
``x1, y1, x2, y2``. A frame is keyed as the AVA evaluator keys it: ``"<video_id>,<stamp:04d>"``.

The export's labelled rows are read back (by the release) with :func:`read_labels`, the
same parser under the export's column names; ``boxes.csv`` (every person's keyframe box
before labels, no action column) has its own reader, :func:`read_boxes`. Every float is
the one the file wrote (``repr`` gives the file's text back: ``0.99``, ``1.0``).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pandas as pd

from microg4m.common import faults

BOX = ["x1", "y1", "x2", "y2"]
SPLIT_FILES = {"train": "ava_train.csv", "val": "ava_val_gt.csv", "test": "ava_test_gt.csv"}  # the export's ground truth


def frame_key(video_id: str, stamp) -> str:
    """The AVA evaluator's key of a frame (``make_image_key``): ``video,%04d``."""
    return f"{video_id},{int(stamp):04d}"


def read_ava(path: str | os.PathLike, *, last: str) -> pd.DataFrame:
    """An AVA CSV as ``DataFrame(line, video_id, stamp, x1, y1, x2, y2, action_id, <last>)``.

    ``last`` names the eighth column: ``person_id`` (ground truth; optional, 7 columns
    allowed) or ``score`` (detections; required). A header row is skipped. A row that does
    not parse raises a ValueError naming the file, the line and the reason: a metric over
    part of a file would be silently wrong.
    """
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
        raise ValueError(f"{path}: cannot read ({exc})") from None
    out, bad = [], []
    for no, row in enumerate(rows, 1):
        if not row or not any(c.strip() for c in row):
            continue
        if no == 1 and row[0].strip() == "video_id":
            continue  # a header
        if len(row) not in ((7, 8) if last == "person_id" else (8,)):
            bad.append(f"line {no}: {len(row)} columns, expected {'7 or 8' if last == 'person_id' else 8}")
            continue
        try:
            stamp = int(row[1])
            box = [float(v) for v in row[2:6]]
            action = int(row[6])
            tail = (int(row[7]) if last == "person_id" else float(row[7])) if len(row) == 8 else -1
        except ValueError as exc:
            bad.append(f"line {no}: {exc}")
            continue
        if not all(np.isfinite(box)) or (last == "score" and not np.isfinite(tail)):
            bad.append(f"line {no}: a value that is not finite")
            continue
        out.append((no, row[0].strip(), stamp, *box, action, tail))
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise ValueError(f"{path}: not an AVA CSV: {'; '.join(bad[:5])}{more}")
    df = pd.DataFrame(out, columns=["line", "video_id", "stamp", *BOX, "action_id", last])
    return df.astype({"line": int, "stamp": int, "action_id": int, last: int if last == "person_id" else float})


LABEL_COLUMNS = ["video_id", "frame_stamp", "xmin", "ymin", "xmax", "ymax", "action_id", "person_id"]  # the export's
BOX_COLUMNS = ["video_id", "frame_stamp", "xmin", "ymin", "xmax", "ymax", "person_id"]  # boxes.csv


def read_labels(path: str | os.PathLike) -> pd.DataFrame:
    """The export's labelled rows (``ava_format_with_header.csv`` or a split file) under its
    column names, in file order (:func:`read_ava`'s checks; ValueError naming the line)."""
    df = read_ava(path, last="person_id").drop(columns="line")
    return df.rename(columns={"stamp": "frame_stamp", "x1": "xmin", "y1": "ymin", "x2": "xmax", "y2": "ymax"})[
        LABEL_COLUMNS].astype({"video_id": str})


def read_boxes(path: str | os.PathLike) -> pd.DataFrame:
    """The keyframe boxes of ``boxes.csv``, in file order (ValueError naming the file and the reason)."""
    types = {"video_id": str, "frame_stamp": "int64", "xmin": "float64", "ymin": "float64", "xmax": "float64",
             "ymax": "float64", "person_id": "int64"}
    try:
        df = pd.read_csv(path, dtype={"video_id": str}, keep_default_na=False, float_precision="round_trip")
    except pd.errors.EmptyDataError:
        df = pd.DataFrame(columns=BOX_COLUMNS)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
        raise ValueError(f"{path}: unreadable keyframe boxes ({type(exc).__name__}: {exc})") from None
    if list(df.columns) != BOX_COLUMNS:
        raise ValueError(f"{path}: columns {','.join(map(str, df.columns))}, expected {','.join(BOX_COLUMNS)}")
    try:
        return df.astype(types)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: a cell is not of its column's type ({exc})") from None
