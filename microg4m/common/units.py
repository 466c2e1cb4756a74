"""Job units: which sources each job of a per-source stage takes (``sources_per_job``).

Each per-source stage runs one job per unit. A unit is one source (``1``) or a run of
consecutive sources of the table, so appending sources changes only the last units.
``auto`` picks enough sources per job to keep every slot busy with few jobs: on a
workstation the slots are the machine's CPUs (10 sources on 2 CPUs: 2 jobs per stage of
5 sources), not ``--cores``, so that a re-run with other ``--cores`` keeps its units and
results; on a cluster, where every job is a submission and the compute
node's own Snakemake must see the same units, a fixed ``CLUSTER_SLOTS``. At most
``AUTO_MAX`` sources per job, so that 10^4 sources still give enough jobs to spread and
a failed job redoes little. Under ``auto`` the units follow the number of sources: after
sources are appended the units are planned anew and the per-source stages run again
(detect replays its frame cache); an integer keeps earlier units when sources are appended.
"""

from __future__ import annotations

import math

AUTO_MAX = 50
CLUSTER_SLOTS = 100


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
