"""Track files: ``tracks/{unit}.csv`` (and ``corrected/``) and the MOT text of one clip."""

from __future__ import annotations

import os

import pandas as pd


COLUMNS = ["video_id", "frame_id", "person_id", "xmin", "ymin", "xmax", "ymax", "conf"]


def read_tracks(path: str | os.PathLike) -> pd.DataFrame:
    """A tracks CSV (``video_id,frame_id,person_id,xmin,ymin,xmax,ymax,conf``), numeric."""
    df = pd.read_csv(path, dtype={"video_id": str}, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    df = df[COLUMNS].copy()
    for c in COLUMNS[1:]:
        df[c] = pd.to_numeric(df[c], errors="raise")
    return df.astype({"frame_id": int, "person_id": int})


def mot_text(rows: pd.DataFrame) -> str:
    """MOTChallenge lines of one clip's track rows."""
    lines = [
        f"{r.frame_id},{r.person_id},{r.xmin:.2f},{r.ymin:.2f},{r.xmax - r.xmin:.2f},{r.ymax - r.ymin:.2f},"
        f"{r.conf:.4f},-1,-1,-1"
        for r in rows.sort_values(["frame_id", "person_id"]).itertuples(index=False)
    ]
    return "".join(f"{line}\n" for line in lines)
