"""The scene transitions table, ``scenes/{unit}.tsv`` (``clip_id, cuts, gradual``).

``cuts``: every transition the chosen detector (``scenes.detector``) found inside the
clip, as the 1-based frame at which the new shot starts; ``gradual``: those of them that
are gradual (a dissolve, a fade, ...; only TransNetV2 tells, so always empty with the
PySceneDetect detectors). Tables written before ``gradual`` existed (``clip_id, cuts``)
read with no gradual transitions.
"""

from __future__ import annotations

import os

import pandas as pd


COLUMNS = ["clip_id", "cuts", "gradual"]
REQUIRED = ["clip_id", "cuts"]


def format_cuts(cuts: list[int]) -> str:
    return ";".join(str(c) for c in cuts)


def parse_cuts(text) -> list[int]:
    """Inverse of format_cuts; empty/NaN -> []."""
    if text is None or (isinstance(text, float) and text != text) or str(text).strip() == "":
        return []
    return [int(x) for x in str(text).split(";")]


def read_scenes(path: str | os.PathLike) -> pd.DataFrame:
    """The scenes table with ``cuts`` and ``gradual`` as lists of ints."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: scenes table lacks columns {missing}")
    if "gradual" not in df.columns:
        df["gradual"] = ""
    for col in ("cuts", "gradual"):
        df[col] = df[col].map(parse_cuts)
    bad = [c for c, cuts, grad in zip(df["clip_id"], df["cuts"], df["gradual"]) if not set(grad) <= set(cuts)]
    if bad:
        raise ValueError(f"{path}: gradual transitions that are not among the cuts for clips {bad[:5]}")
    return df[COLUMNS]
