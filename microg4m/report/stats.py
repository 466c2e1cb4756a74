"""Dataset statistics from the export, in the layout of the released
``statistics/dataset_statistics`` tables, plus two PNG plots.

Tables (UTF-8 with a BOM, as released, except ``overall_result.csv`` which has none):

* ``action_result_{all,movie,real}.csv``: ``action_id,action_name,count,ratio(%)``
* ``label_type_result_{all,movie,real}.csv``: ``label_type,count,ratio(%)``
* ``person_count_{all,movie,real}.csv``: ``person_count,video_count,ratio(%)``
* ``overall_result.csv``: ``type of amount,number`` (clips, actions, action types)
* ``split_result.csv`` (ours): ``split,video_count,person_count,row_count``

Counts are over the AVA rows (one per action); ratios are percentages rounded to 2
decimals; rows are sorted by count, descending (ties: by id / name), persons per clip
by the person count. Without labels the action and label-type tables are header-only
and persons come from the keyframe boxes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402
import pandas as pd  # noqa: E402

from microg4m.common.atomic import atomic_path, write_csv, write_text  # noqa: E402
from microg4m.formats.splits import SPLITS  # noqa: E402

SUBSETS = {"all": ("m", "r"), "movie": ("m",), "real": ("r",)}


def _ratio(counts: pd.Series) -> pd.Series:
    total = counts.sum()
    return (counts / total * 100).round(2) if total else counts.astype(float)


def action_table(ava: pd.DataFrame, label_map: pd.DataFrame) -> pd.DataFrame:
    counts = ava.groupby("action_id").size()
    df = pd.DataFrame({"action_id": counts.index.astype(int), "count": counts.values})
    df = df.sort_values(["count", "action_id"], ascending=[False, True], kind="stable")
    names = dict(zip(label_map["id"], label_map["name"]))
    df.insert(1, "action_name", df["action_id"].map(names))
    df["ratio(%)"] = _ratio(df["count"])
    return df.reset_index(drop=True)


def label_type_table(ava: pd.DataFrame, label_map: pd.DataFrame) -> pd.DataFrame:
    types = dict(zip(label_map["id"], label_map["label_type"]))
    counts = ava["action_id"].map(types).value_counts()
    df = pd.DataFrame({"label_type": counts.index.astype(str), "count": counts.values})
    df = df.sort_values(["count", "label_type"], ascending=[False, True], kind="stable")
    df["ratio(%)"] = _ratio(df["count"])
    return df.reset_index(drop=True)


def person_table(persons: pd.DataFrame) -> pd.DataFrame:
    per_clip = persons.groupby("video_id")["person_id"].nunique()
    counts = per_clip.value_counts().sort_index()
    df = pd.DataFrame({"person_count": counts.index.astype(int), "video_count": counts.values})
    df["ratio(%)"] = _ratio(df["video_count"])
    return df


def _empty(columns) -> pd.DataFrame:
    return pd.DataFrame(columns=columns)


def _write_bom_csv(path: Path, df: pd.DataFrame) -> None:
    write_csv(path, df, encoding="utf-8-sig")


def write(
    out_dir: str | os.PathLike,
    *,
    label_map: pd.DataFrame,
    clips: pd.DataFrame,
    persons: pd.DataFrame,
    assignment: Mapping[str, str],
    ava: pd.DataFrame | None = None,
) -> dict[str, pd.DataFrame]:
    """Write the tables and plots into ``out_dir``; return the ``all`` tables.

    ``clips``: the dataset's clips (``clip_id, clip_type`` r/m). ``persons``: distinct
    ``video_id, person_id`` pairs. ``ava``: AVA rows (``video_id, person_id, action_id``)
    or None without labels. ``assignment``: clip -> split.
    """
    out = Path(out_dir)
    ctype = dict(zip(clips["clip_id"], clips["clip_type"]))
    tables: dict[str, pd.DataFrame] = {}
    for name, types in SUBSETS.items():
        in_subset = {c for c, t in ctype.items() if t in types}
        p = persons[persons["video_id"].isin(in_subset)]
        if ava is not None:
            a = ava[ava["video_id"].isin(in_subset)]
            act, lt = action_table(a, label_map), label_type_table(a, label_map)
        else:
            act = _empty(["action_id", "action_name", "count", "ratio(%)"])
            lt = _empty(["label_type", "count", "ratio(%)"])
        pc = person_table(p) if len(p) else _empty(["person_count", "video_count", "ratio(%)"])
        _write_bom_csv(out / f"action_result_{name}.csv", act)
        _write_bom_csv(out / f"label_type_result_{name}.csv", lt)
        _write_bom_csv(out / f"person_count_{name}.csv", pc)
        tables[name] = {"action": act, "label_type": lt, "person": pc}

    n_movie = sum(t == "m" for t in ctype.values())
    overall = [("all video", len(ctype)), ("movie", n_movie), ("real", len(ctype) - n_movie)]
    for name in SUBSETS:
        act = tables[name]["action"]
        overall.append((f"{name} action", int(act["count"].sum()) if len(act) else 0))
    for name in SUBSETS:
        overall.append((f"{name} action type", len(tables[name]["action"])))
    write_text(out / "overall_result.csv", "type of amount,number\n" + "".join(f"{k},{v}\n" for k, v in overall))

    rows = []
    for split in (*SPLITS, "all"):
        cl = {c for c, s in assignment.items() if split in ("all", s)}
        n_rows = int(ava["video_id"].isin(cl).sum()) if ava is not None else 0
        rows.append((split, len(cl), int(persons["video_id"].isin(cl).sum()), n_rows))
    _write_bom_csv(
        out / "split_result.csv", pd.DataFrame(rows, columns=["split", "video_count", "person_count", "row_count"])
    )

    _plot_actions(out / "action_distribution.png", tables)
    _plot_persons(out / "persons_per_clip.png", tables)
    return tables["all"]


def _save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


def _plot_actions(path: Path, tables) -> None:
    act = tables["all"]["action"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.28 * len(act) + 2), 5))
    if len(act):
        x = np.arange(len(act))
        for i, (name, color) in enumerate((("movie", "tab:orange"), ("real", "tab:blue"))):
            counts = dict(zip(tables[name]["action"]["action_id"], tables[name]["action"]["count"]))
            ax.bar(x + (i - 0.5) * 0.4, [counts.get(a, 0) for a in act["action_id"]], 0.4, label=name, color=color)
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.8)  # a count of 1 stays visible
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xticks(x, [f"{n} ({a})" for a, n in zip(act["action_id"], act["action_name"])], rotation=90, fontsize=7)
        ax.set_ylabel("rows (log scale)")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no action labels yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("Action distribution")
    fig.tight_layout()
    _save(fig, path)


def _plot_persons(path: Path, tables) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    allp = tables["all"]["person"]
    if len(allp):
        x = np.arange(len(allp))
        for i, name in enumerate(SUBSETS):
            counts = dict(zip(tables[name]["person"]["person_count"], tables[name]["person"]["video_count"]))
            ax.bar(x + (i - 1) * 0.27, [counts.get(p, 0) for p in allp["person_count"]], 0.27, label=name)
        ax.set_xticks(x, [str(p) for p in allp["person_count"]])
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no persons", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("persons per clip")
    ax.set_ylabel("clips")
    ax.set_title("Persons per clip")
    fig.tight_layout()
    _save(fig, path)
