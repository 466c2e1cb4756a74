"""The detector record: what the detector stage made and every detect job loads (JSON)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from microg4m.common import faults
from microg4m.common.atomic import atomic_path

FIELDS = ("weights", "sha256", "device", "runtime", "precision", "batch", "imgsz", "model")
RERUN = "re-run: snakemake --forcerun detector"


def write(path: str | os.PathLike, record: dict) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def read(path: str | os.PathLike) -> dict:
    """A record written by write(), checked for its fields."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
        raise ValueError(f"{path}: not a detector record ({exc}); {RERUN}") from None
    missing = [f for f in FIELDS if f not in record]
    if missing:
        raise ValueError(f"{path}: detector record lacks {missing}; {RERUN}")
    return record
