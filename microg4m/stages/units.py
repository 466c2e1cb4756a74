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
"""

from __future__ import annotations

import glob
import logging
import os
import re
import shutil
from pathlib import Path

from microg4m.formats.unit_plan import write_plan

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


def run(out: str | os.PathLike, plan: dict[str, list[str]], per_unit: list[str]) -> list[Path]:
    """Write the plan to ``out`` and remove the per-unit paths of units not in it; return them."""
    write_plan(out, plan)
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
