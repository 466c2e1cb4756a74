"""A release's memory: ``splits.tsv`` (every released clip with its split and the version
that first released it), read back by the next release so that no clip changes split, and
the previous release itself (its version, its ``CHANGES.md``, its tables, to say what
changed).

``release.previous`` names the folder of the release published last (a copy kept when it
was uploaded, or ``huggingface-cli download --repo-type dataset REPO --local-dir DIR``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from microg4m.common.atomic import write_tsv
from microg4m.formats.splits import SPLITS

SPLITS_FILE = "splits.tsv"
SPLITS_COLUMNS = ["video_id", "source_id", "split", "added"]


def write_splits(path: str | os.PathLike, df: pd.DataFrame) -> None:
    write_tsv(path, df[SPLITS_COLUMNS].sort_values("video_id", kind="stable"))


def read_splits(path: str | os.PathLike) -> pd.DataFrame:
    """``splits.tsv`` as strings; ValueError naming the file and what is wrong."""
    try:
        df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    missing = [c for c in SPLITS_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)} (expected {', '.join(SPLITS_COLUMNS)})")
    bad = df[~df["split"].isin(SPLITS)]
    if len(bad):
        raise ValueError(f"{path}: {bad['video_id'].iloc[0]} has split {bad['split'].iloc[0]!r} "
                         f"(expected {', '.join(SPLITS)})")
    dup = df[df["video_id"].duplicated()]
    if len(dup):
        raise ValueError(f"{path}: {dup['video_id'].iloc[0]} is listed twice")
    return df[SPLITS_COLUMNS]


@dataclass
class Previous:
    folder: Path
    version: str
    splits: pd.DataFrame  # SPLITS_COLUMNS
    changes: str  # its CHANGES.md ("" when none)

    @property
    def assignment(self) -> dict[str, str]:
        return dict(zip(self.splits["video_id"], self.splits["split"]))

    @property
    def added(self) -> dict[str, str]:
        return dict(zip(self.splits["video_id"], self.splits["added"]))


def read_previous(folder: str | os.PathLike) -> Previous:
    """The release in ``folder``; ValueError naming it when it is no release."""
    folder = Path(folder)
    if not (folder / SPLITS_FILE).is_file():
        raise ValueError(f"release.previous {folder}: no {SPLITS_FILE}; not a release folder written by "
                         "microg4m (keep a copy of each release you publish, or download it from the Hub)")
    version = ""
    try:
        version = str(json.loads((folder / "croissant.json").read_text(encoding="utf-8")).get("version") or "")
    except (OSError, ValueError):
        pass
    changes = (folder / "CHANGES.md").read_text(encoding="utf-8") if (folder / "CHANGES.md").is_file() else ""
    return Previous(folder, version or "unknown", read_splits(folder / SPLITS_FILE), changes)
