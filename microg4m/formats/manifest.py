"""The clip manifest of a unit (``clips/{unit}/manifest.tsv``), written by trim and read by every
later stage; the results index (results_index.py) reads every unit's."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from microg4m.common.atomic import write_tsv

COLUMNS = ["clip_id", "source_id", "clip_type", "seq", "start_s", "frames", "width", "height", "status", "reason"]
DTYPES = {
    "clip_id": str, "source_id": str, "clip_type": str, "seq": int, "start_s": int,
    "frames": int, "width": int, "height": int, "status": str, "reason": str,
}


def clip_id(source_id: str, seq: int) -> str:
    return f"{source_id}_{seq:03d}"


def read_manifest(path: str | os.PathLike) -> pd.DataFrame:
    """All rows (ok and dropped), typed; ids stay strings (e.g. ``-Y04Zic1-r4_001``)."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    for col, typ in DTYPES.items():
        if typ is int:
            df[col] = df[col].astype(int)
    return df[COLUMNS]


def ok_clips(path: str | os.PathLike) -> pd.DataFrame:
    """Only the clips that passed trim (exactly 90 frames)."""
    df = read_manifest(path)
    return df[df["status"] == "ok"].reset_index(drop=True)


def clip_file(manifest_path: str | os.PathLike, clip: str) -> Path:
    """Clips live next to their manifest: ``clips/{unit}/{clip_id}.mp4``."""
    return Path(manifest_path).parent / f"{clip}.mp4"


# A unit's clip folder ``clips/{unit}/`` (the trim rule's output, a whole folder, so that
# Snakemake owns every clip in it) holds the clips, their manifest and trim's status table.
MANIFEST = "manifest.tsv"
STATUS = "status.tsv"


def manifest_in(folder: str | os.PathLike) -> Path:
    """The manifest of a clip folder: ``clips/{unit}/manifest.tsv``."""
    return Path(folder) / MANIFEST


def status_in(folder: str | os.PathLike) -> Path:
    """Trim's status table of a clip folder: ``clips/{unit}/status.tsv``."""
    return Path(folder) / STATUS


def write_manifest(path: str | os.PathLike, rows: list[dict]) -> None:
    df = pd.DataFrame(rows, columns=COLUMNS)
    write_tsv(path, df)
