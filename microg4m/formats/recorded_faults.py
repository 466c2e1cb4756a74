"""Faults of the machine that a status table recorded as a property of a source or clip.

Before microg4m/common/faults.py told the two kinds apart, a full disk during download,
trim or frames was written into the stage's status table like a bad input (``failed``,
``unable to write data: [Errno 28] No space left on device``, ffmpeg's ``error code -28``),
and every later run took it as final: the source or the clip's frames stayed lost. Such a
row is not final. :func:`find` names the tables that hold one (the download table, trim's
status table, the frames stage's done list of a unit) and the job output whose removal
makes that job run again; :func:`repair` removes them before the DAG is built
(workflow/rules/common.smk), so the next run redoes those jobs and, because their outputs
change, everything after them, whatever ``--rerun-triggers`` says.

Cheap on every run: a table is parsed only when its text names a machine errno at all.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from microg4m.common import faults
from microg4m.formats.results_index import unit_files

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recorded:
    stage: str  # download | trim | frames
    unit: str
    table: Path  # the status table that holds the row
    item: str  # the source or clip of the row
    reason: str
    redo: Path  # the job output to remove so that the job runs again


def _rows(table: Path, key: str) -> list[tuple[str, str]]:
    """(id, reason) of the failed rows of a status table whose reason is a machine fault."""
    try:
        text = table.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []  # not there (its job has not run): nothing recorded
    if faults.errno_in_text(text) is None and "exit code -" not in text:
        return []
    try:
        df = pd.read_csv(table, sep="\t", dtype=str, keep_default_na=False)
        failed = df[df["status"].isin(["failed", "dropped"])]
        return [(r[key], r["reason"]) for r in failed[[key, "reason"]].to_dict("records")
                if faults.recorded(r["reason"])]
    except (ValueError, KeyError, pd.errors.ParserError):
        return []  # not a table this module knows: its job decides


def find(root: str | Path, units) -> list[Recorded]:
    """The rows of the units' status tables under the results folder ``root`` that
    recorded a fault of the machine, each with the job output to remove."""
    found = []
    for unit in units:
        f = unit_files(Path(root), unit)
        for stage, table, key, redo in (("download", f.download, "source_id", f.download),
                                        ("trim", f.status, "source_id", f.clip_dir),
                                        ("trim", f.manifest, "clip_id", f.clip_dir),
                                        ("frames", f.frames_done, "clip_id", f.frames_done)):
            found += [Recorded(stage, unit, table, item, reason, redo) for item, reason in _rows(table, key)]
    return found


def repair(root: str | Path, units, *, dry_run: bool = False, say=print) -> list[Recorded]:
    """Remove the outputs of the jobs whose status tables recorded a fault of the machine
    (:func:`find`), so that those jobs run again; with ``dry_run`` only say so."""
    found = find(root, units)
    for table in sorted({r.table for r in found}):
        rows = [r for r in found if r.table == table]
        items = ", ".join(r.item for r in rows)
        todo = (f"a run (not a dry run) removes {rows[0].redo} and runs its job again" if dry_run
                else f"{rows[0].redo} removed: its job runs again")
        say(f"microg4m: {table} recorded a fault of the machine as a {rows[0].stage} failure of {items} "
            f"({' '.join(rows[0].reason.split())[:160]}): not final; {todo}")
    if not dry_run:
        for redo in sorted({r.redo for r in found}):
            if redo.is_dir() and not redo.is_symlink():
                shutil.rmtree(redo)
            else:
                redo.unlink(missing_ok=True)
    return found
