"""Track files: ``tracks/{unit}.csv`` (and ``corrected/``), their one reader, and the MOT
text of one clip."""

from __future__ import annotations

import os
import sys
from typing import Callable

import pandas as pd

from microg4m.common import faults


COLUMNS = ["video_id", "frame_id", "person_id", "xmin", "ymin", "xmax", "ymax", "conf"]
BOX = ["xmin", "ymin", "xmax", "ymax"]


def _stderr(path) -> Callable[[str], None]:
    return lambda message: print(f"{path}: {message}", file=sys.stderr)


def read_tracks(path: str | os.PathLike, on_problem: Callable[[str], None] | None = None) -> pd.DataFrame:
    """A tracks CSV (``video_id,frame_id,person_id,xmin,ymin,xmax,ymax,conf``), typed:
    ``video_id`` str, ``frame_id`` and ``person_id`` int, the box and ``conf`` float; a file
    without ``conf`` (written by hand), or a row without a number there, gets 1.0. Rows in
    file order.

    A file that cannot be read or lacks a column raises ValueError naming the file. Rows
    with a missing or non-numeric value, or a frame or person id that is not an integer
    >= 1, are left out and named: ``on_problem(message)`` (default: printed on stderr
    after the file's name); nothing is dropped without a word.
    """
    try:
        df = pd.read_csv(path, dtype={"video_id": str}, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
        raise ValueError(f"{path}: unreadable tracks ({type(exc).__name__}: {exc})") from None
    missing = [c for c in COLUMNS[:-1] if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    df = df[COLUMNS[:-1]].assign(conf=df["conf"] if "conf" in df.columns else 1.0)
    for c in COLUMNS[1:]:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["conf"] = df["conf"].fillna(1.0)
    ids = df[["frame_id", "person_id"]]
    ok = df[COLUMNS[1:-1]].notna().all(axis=1) & (ids % 1 == 0).all(axis=1) & (ids >= 1).all(axis=1)
    if not ok.all():
        (on_problem or _stderr(path))(
            f"{int((~ok).sum())} row(s) with a missing or non-numeric value or a bad frame/person id; ignored")
    return df[ok].astype({"frame_id": int, "person_id": int}).reset_index(drop=True)


def mot_text(rows: pd.DataFrame) -> str:
    """MOTChallenge lines of one clip's track rows."""
    lines = [
        f"{r.frame_id},{r.person_id},{r.xmin:.2f},{r.ymin:.2f},{r.xmax - r.xmin:.2f},{r.ymax - r.ymin:.2f},"
        f"{r.conf:.4f},-1,-1,-1"
        for r in rows.sort_values(["frame_id", "person_id"]).itertuples(index=False)
    ]
    return "".join(f"{line}\n" for line in lines)
