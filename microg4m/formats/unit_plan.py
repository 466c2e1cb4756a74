"""The unit plan of a run: ``results/units.tsv``, which sources each per-unit job takes.

One row per source, in the sources table's order: ``unit, source_id, work`` (the work the plan counted for
the source, microg4m/common/source_work.py: its frames weighted by the detector's input
size; empty where it was not known; files of earlier versions have no ``work``). The workflow writes it from the plan it runs (``sources_per_job``) and plans
the next run from it (``auto`` keeps its units), so that whoever reads the results
folder afterwards (annotate, team mode, captions, CVAT, the CLI, the release) knows which
per-unit files are current: a folder of a unit that is not in the plan is a leftover of an
earlier plan, never a clip's home.
"""

from __future__ import annotations

import os

import pandas as pd

from microg4m.common.atomic import write_tsv

FILE = "units.tsv"  # its name in the results folder
COLUMNS = ["unit", "source_id"]
WORK = "work"


def write_plan(path: str | os.PathLike, units: dict[str, list[str]],
               work: dict[str, float | None] | None = None, order: list[str] | None = None) -> None:
    """Write ``unit -> [source ids]`` (atomically) with each source's estimated work
    (``work``: source -> work or None); rows in ``order`` (the sources table's; default: the
    order of ``units`` and of each list)."""
    work = work or {}
    rows = [(unit, sid, work.get(sid)) for unit, sids in units.items() for sid in sids]
    if order is not None:
        position = {sid: i for i, sid in enumerate(order)}
        rows.sort(key=lambda row: position.get(row[1], len(position)))
    write_tsv(path, pd.DataFrame(rows, columns=[*COLUMNS, WORK]))


def source_order(path: str | os.PathLike) -> list[str]:
    """The plan's sources in file order (the sources table's order); the file is checked
    as :func:`read_plan` checks it."""
    read_plan(path)
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)["source_id"].tolist()


def read_plan(path: str | os.PathLike, *, with_work: bool = False):
    """``unit -> [source ids]`` in file order; with ``with_work`` also ``source ->
    estimated work or None``. A file without the two columns, or a source in two units,
    is refused with a ValueError naming the file and the reason."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not a unit plan (no column {', '.join(missing)})")
    twice = df.loc[df["source_id"].duplicated(), "source_id"].tolist()
    if twice:
        raise ValueError(f"{path}: source(s) in more than one unit: {', '.join(sorted(set(twice)))}")
    plan: dict[str, list[str]] = {}
    for unit, sid in zip(df["unit"], df["source_id"]):
        plan.setdefault(unit, []).append(sid)
    if not with_work:
        return plan
    texts = df[WORK] if WORK in df.columns else [""] * len(df)
    try:
        work = {sid: float(t) if t.strip() else None for sid, t in zip(df["source_id"], texts)}
    except ValueError as exc:
        raise ValueError(f"{path}: column {WORK}: {exc}") from None
    return plan, work
