"""What the export does with near-duplicate clip pairs (``export.split.duplicates``).

- ``group`` (default): with ``group_by: source``, sources linked by pairs form one split
  unit (connected components), so no pair crosses splits. In clip mode (the
  reference's split, kept as it is) each pair that crosses splits is a warning.
- ``drop``: of each pair one clip stays: clips are taken in clip id order (so by source
  id: name the sources to choose) and a clip is dropped when a clip of another source
  that stayed is its duplicate; the dropped ones are not exported (input_report.tsv
  names each with its partner).
- ``report``: the splits are not changed; crossing pairs are warnings.

Written beside the AVA files: ``duplicates.tsv`` (the pairs among exported clips, with
their splits and what was done) and ``duplicates_by_source.tsv`` (one row per source
pair).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import pandas as pd

from microg4m.common.atomic import write_tsv
from microg4m.formats.duplicates import CONTAMINATION_COLUMNS, PAIR_COLUMNS, read_pairs

POLICIES = ("group", "drop", "report")
SOURCE_COLUMNS = ["source_a", "source_b", "pairs", "clips_a", "clips_b", "similarity_max", "similarity_mean",
                  "offset_s_median", "mirrored", "crossing"]


def check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"export.split.duplicates must be one of {', '.join(POLICIES)}, got {policy!r}")


def load(path: str | os.PathLike, kept: set[str]) -> pd.DataFrame:
    """The pairs of the duplicates stage whose two clips are exported."""
    pairs = read_pairs(path)
    return pairs[pairs["clip_a"].isin(kept) & pairs["clip_b"].isin(kept)].reset_index(drop=True)


def drop_clips(pairs: pd.DataFrame) -> dict[str, str]:
    """Dropped clip -> the duplicate that stays (the first in clip id order)."""
    partners: dict[str, set[str]] = {}
    for a, b in zip(pairs["clip_a"], pairs["clip_b"]):
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    stay: set[str] = set()
    dropped: dict[str, str] = {}
    for c in sorted(partners):
        earlier = sorted(p for p in partners[c] if p < c and p in stay)
        if earlier:
            dropped[c] = earlier[0]
        else:
            stay.add(c)
    return dropped


def linked_groups(pairs: pd.DataFrame, groups: Mapping[str, str]) -> dict[str, str]:
    """Clip -> group after joining the groups (sources) linked by a pair: each connected
    component is named by its smallest group name."""
    parent: dict[str, str] = {}

    def root(g: str) -> str:
        while parent.get(g, g) != g:
            parent[g] = parent.get(parent[g], parent[g])  # path halving
            g = parent[g]
        return g

    for a, b in zip(pairs["clip_a"], pairs["clip_b"]):
        ra, rb = root(groups[a]), root(groups[b])
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {clip: root(g) for clip, g in groups.items()}


def annotate(pairs: pd.DataFrame, assignment: Mapping[str, str], dropped: Mapping[str, str]) -> pd.DataFrame:
    """The pairs with ``split_a, split_b, decision``: same split, crosses splits, dropped
    CLIP, or not both in the splits (a clip without labels when there are labels)."""
    out = pairs.copy()
    out["split_a"] = out["clip_a"].map(assignment).fillna("")
    out["split_b"] = out["clip_b"].map(assignment).fillna("")

    def decision(r) -> str:
        gone = [c for c in (r.clip_a, r.clip_b) if c in dropped]
        if gone:
            return "dropped " + " and ".join(gone)
        if not (r.split_a and r.split_b):  # with labels, the splits hold the labelled clips only
            return "not both in the splits"
        return "same split" if r.split_a == r.split_b else "crosses splits"

    out["decision"] = [decision(r) for r in out.itertuples(index=False)]
    return out


def by_source(annotated: pd.DataFrame) -> pd.DataFrame:
    """One row per source pair: pair and clip counts, similarity, median offset, crossings."""
    if annotated.empty:
        return pd.DataFrame(columns=SOURCE_COLUMNS)
    g = annotated.groupby(["source_a", "source_b"], sort=True)
    out = pd.DataFrame({
        "pairs": g.size(),
        "clips_a": g["clip_a"].nunique(),
        "clips_b": g["clip_b"].nunique(),
        "similarity_max": g["similarity"].max().round(3),
        "similarity_mean": g["similarity"].mean().round(3),
        "offset_s_median": g["offset_s"].median().round(3),
        "mirrored": g["mirrored"].sum().astype(int),
        "crossing": g["decision"].apply(lambda d: int((d == "crosses splits").sum())),
    }).reset_index()
    return out[SOURCE_COLUMNS]


def crossing_warning(r) -> str:
    return (f"near-duplicate clips in two splits: {r.clip_a} ({r.split_a}) and {r.clip_b} ({r.split_b}), "
            f"similarity {r.similarity:g}, offset {r.offset_s:g} s{', mirrored' if r.mirrored else ''}; "
            "export.split.group_by: source keeps them in one split")


def write(out_dir: str | os.PathLike, annotated: pd.DataFrame) -> None:
    out = Path(out_dir)
    write_tsv(out / "duplicates.tsv", annotated[[*PAIR_COLUMNS, "split_a", "split_b", "decision"]])
    write_tsv(out / "duplicates_by_source.tsv", by_source(annotated))


def write_contamination(path_in: str | os.PathLike, out_dir: str | os.PathLike,
                        assignment: Mapping[str, str]) -> pd.DataFrame:
    """``contamination.tsv``: the exported clips that match a reference set, with their split."""
    df = pd.read_csv(path_in, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in CONTAMINATION_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path_in}: not a contamination table (missing column(s) {', '.join(missing)})")
    df = df[df["clip_id"].isin(assignment)].copy()
    df["split"] = df["clip_id"].map(assignment)
    write_tsv(Path(out_dir) / "contamination.tsv", df[[*CONTAMINATION_COLUMNS, "split"]])
    return df
