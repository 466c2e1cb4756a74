"""The quality table, ``quality/{unit}.tsv``: the scores of every ok clip of a unit.

Columns (one row per clip, in the manifest's order):

- ``clip_id``;
- ``transitions``, ``gradual``: the number of transitions the scenes stage found in the
  clip (``scenes.detector``'s), and how many of them are gradual;
- ``text_share`` (0-1): the share of the frames searched for text on which burnt-in text
  covers at least ``quality.text_min_area`` of the picture; ``text_area`` (0-1): the mean
  share of the picture covered by text on those frames;
- ``camera``: ``static``, ``pan``, ``tilt``, ``zoom``, ``shake`` or ``unknown`` (no
  trackable points); ``camera_magnitude``: the mean shift of the frame's corners, as a
  share of the frame diagonal per frame;
- ``sharpness``: the mean over the scored frames of the variance of the Laplacian over the
  variance of the gray levels (at the stage's working size; microg4m.common.image_quality);
- ``exposure`` (0-1): the mean luma; ``clipped`` (0-1): the mean share of crushed or blown
  pixels.

The filter turns a score into a rejection reason when a ``filter.*`` threshold is set.
"""

from __future__ import annotations

import os

import pandas as pd

from microg4m.common.atomic import write_tsv

COLUMNS = ["clip_id", "transitions", "gradual", "text_share", "text_area", "camera", "camera_magnitude",
           "sharpness", "exposure", "clipped"]
CAMERA = ("static", "pan", "tilt", "zoom", "shake", "unknown")
NUMBERS = ["text_share", "text_area", "camera_magnitude", "sharpness", "exposure", "clipped"]
COUNTS = ["transitions", "gradual"]
# how each number is written
DECIMALS = {"text_share": 4, "text_area": 4, "camera_magnitude": 6, "sharpness": 4, "exposure": 4, "clipped": 4}


def write_quality(path: str | os.PathLike, rows: list[dict]) -> pd.DataFrame:
    """Write the rows (dicts with the COLUMNS, numbers as numbers) atomically; return them as written."""
    df = pd.DataFrame(rows, columns=COLUMNS)
    out = df.copy()
    for col, n in DECIMALS.items():
        out[col] = [f"{float(v):.{n}f}" for v in df[col]]
    for col in COUNTS:
        out[col] = [str(int(v)) for v in df[col]]
    write_tsv(path, out)
    return out


def read_quality(path: str | os.PathLike, *, as_text: bool = False) -> pd.DataFrame:
    """The quality table with numbers as floats and counts as ints (``as_text``: checked the
    same way, but its cells as written); ValueError naming the file and what is wrong with it."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not a quality table (missing columns {missing})")
    if df["clip_id"].duplicated().any():
        raise ValueError(f"{path}: clip {df.loc[df['clip_id'].duplicated(), 'clip_id'].iloc[0]} is listed twice")
    typed = typed_scores(df, path)
    return (df if as_text else typed)[COLUMNS]


def typed_scores(df: pd.DataFrame, path, *, blanks: bool = False) -> pd.DataFrame:
    """``df`` (read as text) with its score columns typed: counts as ints, numbers as floats,
    ``camera`` checked; with ``blanks`` an empty cell is allowed (a clip not scored: NA,
    NaN, an empty camera). ValueError naming ``path``, the clip and what is wrong."""
    df = df.copy()
    bad = sorted(set(df["camera"]) - set(CAMERA) - ({""} if blanks else set()))
    if bad:
        raise ValueError(f"{path}: unknown camera classes {bad}")
    for col in NUMBERS + COUNTS:
        empty = (df[col] == "") if blanks else pd.Series(False, index=df.index)
        values = pd.to_numeric(df[col].mask(empty), errors="coerce")
        wrong = values.isna() & ~empty
        if wrong.any():
            raise ValueError(f"{path}: clip {df.loc[wrong, 'clip_id'].iloc[0]}: {col} is not a number "
                             f"({df.loc[wrong, col].iloc[0]!r})")
        df[col] = values.astype("Int64" if blanks else int) if col in COUNTS else values.astype(float)
    return df
