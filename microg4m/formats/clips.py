"""The clips of a results folder (manifests joined with the filter's decisions), and the
report of problems with the inputs (read by export and the VQA export)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

from microg4m.common import faults
from microg4m.common.atomic import write_tsv
from microg4m.formats.decisions import kept_ids, read_decisions
from microg4m.formats.manifest import read_manifest


_CLIP_ID = re.compile(r"[A-Za-z0-9_-]+")  # fullmatch


class Report:
    """Problems with the inputs: ``input, item, problem`` rows."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def add(self, inp, item, problem: str) -> None:
        self.rows.append((str(inp), str(item), " ".join(str(problem).split())))
        print(f"export: {inp}: {item + ': ' if item else ''}{problem}", file=sys.stderr)

    def write(self, path: Path) -> None:
        write_tsv(path, pd.DataFrame(sorted(self.rows), columns=["input", "item", "problem"]))


def kept_clips(manifest: pd.DataFrame, decisions: pd.DataFrame) -> pd.DataFrame:
    """The manifest rows of one unit's clips that trim accepted and the filter kept,
    indexed by clip id (the column stays) in clip-id order."""
    keep = set(kept_ids(decisions))
    ok = manifest[(manifest["status"] == "ok") & manifest["clip_id"].isin(keep)]
    return ok.set_index("clip_id", drop=False).sort_index()


def load_clips(manifests, decisions, report: Report) -> pd.DataFrame:
    """All manifest rows with ``kept`` (trim ok and filter keep = 1) and ``why`` (if not)."""
    parts = []
    for path in sorted(map(str, manifests)):
        try:
            parts.append(read_manifest(path))
        except (OSError, KeyError, ValueError) as exc:
            faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
            report.add(path, "", f"unreadable manifest ({type(exc).__name__}: {exc})")
    clips = pd.concat(parts, ignore_index=True) if parts else read_manifest_empty()
    bad = ~clips["clip_id"].map(lambda c: bool(_CLIP_ID.fullmatch(c))).astype(bool)
    for c in clips.loc[bad, "clip_id"]:
        report.add("manifest", c, "clip id has characters outside [A-Za-z0-9_-]; ignored")
    clips = clips[~bad]
    for c in clips.loc[clips["clip_id"].duplicated(), "clip_id"]:
        report.add("manifest", c, "clip id in more than one manifest row; first kept")
    clips = clips.drop_duplicates("clip_id").set_index("clip_id", drop=False)

    keep: dict[str, str] = {}
    for path in sorted(map(str, decisions)):
        try:
            d = read_decisions(path)
        except (OSError, ValueError) as exc:
            faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
            report.add(path, "", f"unreadable filter decisions ({type(exc).__name__}: {exc})")
            continue
        reasons = d["reason"] if "reason" in d else pd.Series([""] * len(d))
        for clip, k, why in zip(d["clip_id"], d["keep"].str.strip(), reasons):
            if clip in keep:
                report.add(path, clip, "second filter decision for this clip; first kept")
            else:
                keep[clip] = "" if k == "1" else f"filter: {why or 'keep=' + k}"

    def why(r) -> str:
        if r.status != "ok":
            return f"trim: {r.status}" + (f" ({r.reason})" if r.reason else "")
        if r.clip_id not in keep:
            return "no filter decision"
        return keep[r.clip_id]

    clips["why"] = [why(r) for r in clips.itertuples(index=False)]
    size_bad = (clips["why"] == "") & ((clips["width"] <= 0) | (clips["height"] <= 0))
    for c in clips.index[size_bad]:
        report.add("manifest", c, "kept clip without a frame size; not exported")
    clips.loc[size_bad, "why"] = "no frame size in the manifest"
    clips["kept"] = clips["why"] == ""
    return clips.sort_index()


def read_manifest_empty() -> pd.DataFrame:
    from microg4m.formats.manifest import COLUMNS

    return pd.DataFrame(columns=COLUMNS).astype({c: int for c in ("seq", "start_s", "frames", "width", "height")})
