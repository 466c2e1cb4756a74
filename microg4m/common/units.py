"""Job units: which sources each job of a per-source stage takes (``sources_per_job``).

Each per-source stage runs one job per unit. An integer ``sources_per_job`` makes units of
that many consecutive sources of the table (``1``: each source alone, the unit named by
it), so appending sources changes only the last units.

``auto`` picks the number of units, then balances them by work. The number: enough sources
per job to keep every slot busy with few jobs: on a workstation the slots are the
machine's CPUs (10 sources on 2 CPUs: 2 jobs per stage), not ``--cores``, so that a re-run
with other ``--cores`` keeps its units and results; on a cluster, where every job is a
submission and the compute node's own Snakemake must see the same units, a fixed
``CLUSTER_SLOTS``. At most ``AUTO_MAX`` sources per job, so that 10^4 sources still give
enough jobs to spread and a failed job redoes little. The work: a source's frames, the
frames detect runs on (``CLIP_FRAMES`` per whole clip of ``CLIP_SECONDS``), known for a
local file when the DAG is built (its container's length, microg4m.common.media) and for
a downloaded source from its download record; a source of unknown length counts as the
median of the known ones (``DEFAULT_FRAMES`` when none is known). Sources go longest
first to the unit with the least work so far, so that the units' detect jobs end
together (``pack``).

Re-runs keep the units: the plan of the last run (``results/units.tsv``, with the frames
each source was planned with) is the starting point. An appended source joins the unit
with the least work (or a new unit, when the number of units grows), so adding one
source re-plans one unit; a removed source leaves the other sources of its unit where
they are. The plan is a function of the sources table, the last plan and the sources'
lengths only, so ``snakemake -n`` after a finished run plans the same units (and on a
cluster the compute node's Snakemake, reading the same files, too).
"""

from __future__ import annotations

import heapq
import math
import re
import statistics
from typing import Mapping

from microg4m import CLIP_FRAMES, CLIP_SECONDS

AUTO_MAX = 50
CLUSTER_SLOTS = 100
DEFAULT_FRAMES = 10 * CLIP_FRAMES  # a source of unknown length when no length is known (30 s)
BATCH = re.compile(r"batch\d{5}")  # the units' names under auto (and an integer > 1)


def per_job(setting, n_sources: int, slots: int) -> int:
    """Sources per job for a ``sources_per_job`` value (an integer >= 1 or ``auto``)."""
    if setting == "auto":
        return max(1, min(AUTO_MAX, math.ceil(n_sources / max(1, int(slots)))))
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        raise ValueError(f"sources_per_job = {setting!r}: expected an integer >= 1 or auto")
    return setting


def make_units(ids: list[str], per_job: int) -> dict[str, list[str]]:
    """Unit name -> its sources: each source alone (per_job 1, the unit is the source id),
    else consecutive batches ``batch00000``, ``batch00001``, ..."""
    if per_job == 1:
        return {sid: [sid] for sid in ids}
    return {f"batch{i // per_job:05d}": list(ids[i: i + per_job]) for i in range(0, len(ids), per_job)}


def clip_frames(duration: float | None) -> int | None:
    """The frames detect runs on for a source of ``duration`` seconds (its whole clips);
    None when the duration is unknown."""
    try:
        duration = float(duration)
    except (TypeError, ValueError):
        return None
    if not duration >= 0 or math.isinf(duration):  # (NaN too)
        return None
    return int(duration // CLIP_SECONDS) * CLIP_FRAMES


def estimate(ids: list[str], known: Mapping[str, int | None]) -> dict[str, int]:
    """Every source's frames: its known value, else the median of the known values
    (``DEFAULT_FRAMES`` when none is known)."""
    values = [int(known[s]) for s in ids if known.get(s) is not None]
    default = int(statistics.median(values)) if values else DEFAULT_FRAMES
    return {s: int(known[s]) if known.get(s) is not None else default for s in ids}


def plan(ids: list[str], setting, slots: int, *, frames: Mapping[str, int | None] | None = None,
         previous: Mapping[str, list[str]] | None = None) -> dict[str, list[str]]:
    """The units of ``ids`` (the table's order) for a ``sources_per_job`` setting: an
    integer, consecutive batches (make_units); ``auto``, the number of units of
    ``per_job`` balanced by ``frames`` (source -> frames or None: unknown) from the
    ``previous`` plan (pack)."""
    per = per_job(setting, len(ids), slots)
    if setting != "auto" or per == 1:
        return make_units(ids, per)
    return pack(ids, math.ceil(len(ids) / per), estimate(ids, frames or {}), previous or {})


def loads(units: Mapping[str, list[str]], frames: Mapping[str, int]) -> dict[str, int]:
    """Unit -> the frames of its sources."""
    return {u: sum(frames[s] for s in sids) for u, sids in units.items()}


def pack(ids: list[str], count: int, frames: Mapping[str, int],
         previous: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """``count`` units of ``ids`` whose frames end up close (longest first onto the unit
    with the least frames so far), starting from the ``previous`` plan: its units (those
    named ``batchNNNNN``) keep their sources that are still in ``ids``; when they are more
    than ``count``, the lightest are dissolved; then the sources not placed go, longest
    first, to the unit with the least frames, new units (the first free names) first
    when the count grew. Ties go to the unit with fewer sources, then the first name.
    A first plan of sources all alike (no length known) is runs of consecutive sources,
    as many in each as can be (within one). Units come out in name order, each one's
    sources in the table's order."""
    order = {s: i for i, s in enumerate(ids)}
    units = {u: [s for s in sids if s in order] for u, sids in previous.items() if BATCH.fullmatch(u)}
    units = {u: sids for u, sids in units.items() if sids}
    placed = {s for sids in units.values() for s in sids}
    todo = [s for s in ids if s not in placed]
    if not units and len({frames[s] for s in todo}) == 1:  # a first plan, all alike (lengths unknown)
        cut = [-(-i * len(todo) // count) for i in range(count + 1)]  # consecutive, sizes within one
        return {f"batch{i:05d}": todo[cut[i]:cut[i + 1]] for i in range(count) if cut[i] < cut[i + 1]}
    load = loads(units, frames)
    while len(units) > count:  # fewer units now: dissolve the lightest
        lightest = min(units, key=lambda u: (load[u], len(units[u]), u))
        todo += units.pop(lightest)
        del load[lightest]
    free = (f"batch{i:05d}" for i in range(len(ids) + len(previous) + 1))
    while len(units) < count:
        name = next(n for n in free if n not in units)
        units[name], load[name] = [], 0
    heap = [(load[u], len(units[u]), u) for u in units]
    heapq.heapify(heap)
    for sid in sorted(todo, key=lambda s: (-frames[s], order[s])):
        work, n, unit = heapq.heappop(heap)
        units[unit].append(sid)
        heapq.heappush(heap, (work + frames[sid], n + 1, unit))
    return {u: sorted(units[u], key=order.__getitem__) for u in sorted(units) if units[u]}


def spread(units: Mapping[str, list[str]], frames: Mapping[str, int]) -> float:
    """How far apart the units' frames are: (most - least) / most (0: all alike)."""
    work = list(loads(units, frames).values())
    return (max(work) - min(work)) / max(work) if work and max(work) else 0.0
