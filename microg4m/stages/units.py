"""Units stage: ``results/units.tsv``, the unit plan the run uses, and no file or folder of
another plan left behind.

Each per-source stage runs one job per unit (``sources_per_job``). When the plan changes
(sources appended under ``auto``, or another ``sources_per_job``), the jobs of the new
units write their own files, and those of units that are no longer planned would stay
forever: clip folders that an earlier plan made, their frames, tracks, logs. This stage
writes the plan (microg4m.formats.unit_plan: whoever reads the results folder knows from
it which per-unit files are current) and removes every per-unit path of a unit that is
not in it, for each per-unit path the workflow declares (outputs, logs, benchmarks).
The workflow re-runs it whenever the plan changes (the plan is its param).

:func:`plan_for` makes the plan while the DAG is built (workflow/rules/common.smk): under
``auto`` from the plan on disk and each source's estimated work (microg4m/common/units.py).
"""

from __future__ import annotations

import glob
import logging
import os
import re
import shutil
from pathlib import Path
from typing import NamedTuple

from microg4m.common import faults
from microg4m.common import source_work
from microg4m.common import units as _units
from microg4m.formats.unit_plan import FILE, read_plan, write_plan

log = logging.getLogger(__name__)

UNIT = "[A-Za-z0-9_-]+"  # a unit's name (the workflow's wildcard constraint)


def orphans(patterns: list[str], plan: dict[str, list[str]]) -> list[Path]:
    """The paths that match a per-unit pattern (``results/clips/{unit}``, ...) for a unit
    that is not in ``plan``, sorted."""
    found = set()
    for pattern in patterns:
        if pattern.count("{unit}") != 1 or re.search(r"\{(?!unit\})", pattern):
            raise ValueError(f"{pattern!r}: not a per-unit path (one {{unit}}, no other wildcard)")
        head, tail = pattern.split("{unit}")
        name = re.compile(re.escape(head) + f"({UNIT})" + re.escape(tail))
        for path in glob.glob(glob.escape(head) + "*" + glob.escape(tail)):
            m = name.fullmatch(path)
            if m and m.group(1) not in plan:
                found.add(Path(path))
    return sorted(found)


class Planned(NamedTuple):
    units: dict[str, list[str]]  # unit -> its sources
    work: dict[str, float | None]  # source -> its estimated work now (None: not known)
    recorded: dict[str, float | None]  # what results/units.tsv keeps: the estimate the source was planned with


def plan_for(sources, setting, slots: int, results: str | os.PathLike, *, fps: float, imgsz: int,
             max_height: int | None = None, made_here=None) -> Planned:
    """The unit plan this run uses for the sources table ``sources`` (indexed by source id),
    with each source's estimated work (microg4m/common/source_work.py; empty under an
    integer ``sources_per_job`` or one source per unit, where work plays no part). Under
    ``auto`` the plan on disk (``results/units.tsv``) is kept where it can be (an unreadable
    one is named in a warning and the units are planned anew), and a source keeps the
    estimate it was planned with in ``recorded``, so that the units rule runs again only
    when the plan changes. ``made_here(path)``: whether a local file is one the workflow
    makes itself (the demo videos); a source new to the plan is not measured from it.
    """
    ids = list(sources.index)
    if setting != "auto" or _units.per_job(setting, len(ids), slots) == 1:
        return Planned(_units.plan(ids, setting, slots), {}, {})
    previous, stored = None, {}
    path = Path(results) / FILE
    if path.is_file():
        try:
            previous, stored = read_plan(path, with_work=True)
        except (OSError, ValueError) as exc:
            faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
            log.warning("%s: not read (%s); the units are planned anew", path, exc)
    work = {s: stored.get(s) for s in ids}
    size = dict(fps=fps, imgsz=imgsz, max_height=max_height)
    # new sources: only from what this run does not make; planned ones: also their downloads
    work.update(source_work.estimate(sources, [s for s in ids if s not in stored], results, **size,
                                     downloads=False, made_here=made_here))
    work.update(source_work.estimate(sources, [s for s in ids if s in stored and work[s] is None],
                                     results, **size))
    units = _units.plan(ids, setting, slots, work, previous)
    recorded = {s: stored[s] if s in stored else work[s] for s in ids}
    return Planned(units, work, recorded)


def run(out: str | os.PathLike, plan: dict[str, list[str]], per_unit: list[str],
        work: dict[str, float | None] | None = None, order: list[str] | None = None) -> list[Path]:
    """Write the plan (with each source's estimated ``work``, rows in the sources table's
    ``order``) to ``out`` and remove the per-unit paths of units not in it; return them."""
    write_plan(out, plan, work, order)
    removed = orphans(per_unit, plan)
    for path in removed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
        log.info("removed %s (its unit is not in the plan)", path)
    log.info("units: %d units, %d sources; %d paths of other plans removed", len(plan),
             sum(map(len, plan.values())), len(removed))
    return removed
