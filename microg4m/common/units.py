"""Job units: which sources each job of a per-source stage takes (``sources_per_job``).

Each per-source stage runs one job per unit. With an integer the units are runs of that
many consecutive sources of the table (``1``: each source alone, the unit named by it), so
appending sources changes only the last units.

``auto`` picks how many units keep every slot busy with few jobs: on a workstation the
slots are the machine's CPUs (10 sources on 2 CPUs: 2 units), not ``--cores``, so that a
re-run with other ``--cores`` keeps its units and results; on a cluster, where every job is
a submission and the compute node's own Snakemake must see the same units, a fixed
``CLUSTER_SLOTS``. At most ``AUTO_MAX`` sources per unit, so that 10^4 sources still give
enough jobs to spread and a failed job redoes little. The sources are packed by their work
(frames weighted by the detector's input size, :mod:`microg4m.common.source_work`), longest first, each into the unit with the
least work so far, so that the units' jobs end together (while no source's work is known,
runs of consecutive sources of the table, as with an integer). A plan is kept across re-runs
(``results/units.tsv``): sources removed leave their units, sources added are packed into
the units with the least work (or new units when the plan needs more), so that adding one
source changes one unit and every other unit keeps its results.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping

AUTO_MAX = 50
CLUSTER_SLOTS = 100
BATCH = re.compile(r"batch(\d{5,})")


def per_job(setting, n_sources: int, slots: int) -> int:
    """Sources per job for a ``sources_per_job`` value (an integer >= 1 or ``auto``); under
    ``auto``, the most a unit holds when the sources are spread evenly over the slots."""
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


def filled(ids: list[str], work: Mapping[str, float | None]) -> dict[str, float]:
    """Every source's work: its estimate, or where none is known the median of the known
    ones (1 each when none is known: the sources are then packed by count)."""
    known = [float(work[s]) for s in ids if work.get(s) is not None]
    default = statistics.median(known) if known else 1.0
    return {s: float(work[s]) if work.get(s) is not None else default for s in ids}


def plan(ids: list[str], setting, slots: int, estimates: Mapping[str, float | None] | None = None,
         previous: Mapping[str, list[str]] | None = None) -> dict[str, list[str]]:
    """The unit plan: unit name -> its sources (in the table's order).

    An integer setting gives :func:`make_units`. ``auto`` with at most one source per slot
    gives each source alone (the unit named by it); else ``batchNNNNN`` units packed by
    ``estimates`` (source -> estimated work or None), keeping ``previous`` (the plan on disk)
    where it is an ``auto`` plan of these sources: see :func:`_kept`.
    """
    per = per_job(setting, len(ids), slots)
    if setting != "auto" or per == 1:
        return make_units(ids, per)
    estimates = estimates or {}
    work = filled(ids, estimates)
    order = {s: i for i, s in enumerate(ids)}
    units = _kept(previous, ids, math.ceil(len(ids) / per))
    if units is None and all(estimates.get(s) is None for s in ids):
        return make_units(ids, per)  # no work known yet (URLs not downloaded): runs of the table
    if units is None:  # a plan of its own: k empty units, named below by their first source
        fresh = True
        units = {i: [] for i in range(math.ceil(len(ids) / per))}
    else:
        fresh = False
        need = math.ceil(len(ids) / per) - len(units)
        units.update({name: [] for name in _new_names(units, need)})
    planned = {s for sids in units.values() for s in sids}
    load = {u: sum(work[s] for s in sids) for u, sids in units.items()}
    rank = {u: i for i, u in enumerate(units)}  # ties go to the first unit
    for sid in sorted((s for s in ids if s not in planned), key=lambda s: (-work[s], order[s])):
        open_units = [u for u in units if len(units[u]) < AUTO_MAX]
        if not open_units:
            (name,) = _new_names(units, 1)
            units[name], load[name], rank[name] = [], 0.0, len(rank)
            open_units = [name]
        target = min(open_units, key=lambda u: (load[u], rank[u]))
        units[target].append(sid)
        load[target] += work[sid]
    if fresh:
        _even_out(units, load, work)
    units = {u: sorted(sids, key=order.__getitem__) for u, sids in units.items() if sids}
    if fresh:
        firsts = sorted(units.values(), key=lambda sids: order[sids[0]])
        return {f"batch{i:05d}": sids for i, sids in enumerate(firsts)}
    return dict(sorted(units.items(), key=lambda kv: _batch_number(kv[0])))


def _even_out(units: dict, load: dict, work: Mapping[str, float], rounds: int = 1000) -> None:
    """After longest-first packing, move or swap sources between the heaviest and the
    lightest unit while that lowers the heavier of the two (a new plan only: a kept plan's
    sources never move). Changes ``units`` and ``load`` in place."""
    for _ in range(rounds):
        heavy, light = max(units, key=load.get), min(units, key=load.get)
        gap = load[heavy] - load[light]
        best, best_gap = None, gap
        for a in units[heavy]:
            if len(units[light]) < AUTO_MAX and abs(gap - 2 * work[a]) < best_gap:  # move a
                best, best_gap = (a, None), abs(gap - 2 * work[a])
            for b in units[light]:  # swap a and b
                d = work[a] - work[b]
                if d > 0 and abs(gap - 2 * d) < best_gap:
                    best, best_gap = (a, b), abs(gap - 2 * d)
        if best is None or best_gap >= gap - 1e-9:
            return
        a, b = best
        units[heavy].remove(a)
        units[light].append(a)
        load[heavy] -= work[a]
        load[light] += work[a]
        if b is not None:
            units[light].remove(b)
            units[heavy].append(b)
            load[light] -= work[b]
            load[heavy] += work[b]


def _kept(previous, ids: list[str], k: int) -> dict[str, list[str]] | None:
    """The previous plan without the sources no longer in the table, if ``auto`` may keep
    it: ``batchNNNNN`` units of at most AUTO_MAX sources, not more than twice the ``k``
    units it would plan now (sources removed leave units smaller; after a switch from
    ``sources_per_job: 1`` or a large integer the sources are packed anew). None: plan anew."""
    if not previous:
        return None
    present = set(ids)
    kept = {u: [s for s in sids if s in present] for u, sids in previous.items()}
    kept = {u: sids for u, sids in kept.items() if sids}
    if (not kept or len(kept) > 2 * k or any(len(s) > AUTO_MAX for s in kept.values())
            or not all(BATCH.fullmatch(u) for u in kept)):
        return None
    return kept


def _batch_number(name) -> int:
    m = BATCH.fullmatch(str(name))
    return int(m.group(1)) if m else -1


def _new_names(units, n: int) -> list[str]:
    start = max((_batch_number(u) for u in units), default=-1) + 1
    return [f"batch{i:05d}" for i in range(start, start + max(0, n))]


def loads(units: Mapping[str, list[str]], estimates: Mapping[str, float | None]) -> dict[str, float]:
    """Unit -> its estimated work (unknown sources counted at the median, as planned)."""
    work = filled([s for sids in units.values() for s in sids], estimates)
    return {u: sum(work[s] for s in sids) for u, sids in units.items()}


def describe(units: Mapping[str, list[str]], estimates: Mapping[str, float | None], show: int = 8) -> str:
    """One line on a plan's balance: each unit's estimated work (the lightest and heaviest
    of many) and how far the heaviest is above the lightest."""
    if not units:
        return "no units"
    load = loads(units, estimates)
    n = sum(map(len, units.values()))
    unknown = sum(1 for sids in units.values() for s in sids if estimates.get(s) is None)
    if unknown == n:
        sizes = sorted({len(sids) for sids in units.values()})
        return (f"{n} sources in {len(units)} units of {' or '.join(map(str, sizes))} sources "
                f"(their work is not known yet: packed by count)")
    if len(load) <= show:
        each = ", ".join(f"{u} {load[u]:,.0f}" for u in units)
    else:
        lo, hi = min(load, key=load.get), max(load, key=load.get)
        each = f"from {lo} {load[lo]:,.0f} to {hi} {load[hi]:,.0f}"
    spread = max(load.values()) / min(load.values()) - 1 if min(load.values()) > 0 else float("inf")
    text = f"{n} sources in {len(units)} units; estimated work per unit (frames at the detector's full input size): {each}; the heaviest {spread:.1%} above the lightest"
    if unknown:
        text += f" ({unknown} of the sources not known yet, counted at the median of the others)"
    return text
