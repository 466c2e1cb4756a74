"""AVA-format CSVs: the ground truth the export writes and the detections a trainer writes.

Both have the AVA columns ``video_id, frame_stamp, x1, y1, x2, y2, action_id`` and an
eighth: ``person_id`` in the ground truth (``ava_{train,val,test}*.csv``, no header; the
export's ``ava_format_with_header.csv`` has one), ``score`` in detections (PySlowFast's
``detections_*.csv``, whose stamps are zero-padded, ``0052``). Boxes are normalised
``x1, y1, x2, y2``. A frame is keyed as the AVA evaluator keys it: ``"<video_id>,<stamp:04d>"``.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pandas as pd

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
