"""Double annotation: each kept clip goes to k annotators, balanced and deterministic.

Clips are taken in clip-id order; each clip that has fewer than k annotators gets the
missing ones from the active annotators it does not have yet, those with the fewest
assigned clips first, ties broken by a hash of (clip, annotator) so that the pairs vary
from clip to clip (every pair meets, which the agreement figures need). The same clips,
annotators and k always give the same assignment; loads differ by at most one.

Assignments are stored and never moved: a clip keeps its annotators when an annotator
joins or k changes (raising k tops clips up). Only active annotators count: the clips of
a disabled annotator get another annotator the next time clips are assigned, and their
labels stay in the history (they count again if the account is enabled again).
"""

from __future__ import annotations

import hashlib
import sqlite3

from .db import now, transaction


def plan(clips: list[str], annotators: list[str], k: int, existing: dict[str, set[str]] | None = None,
         ) -> dict[str, list[str]]:
    """New assignments (clip -> annotators to add), pure; ``existing``: clip -> annotators."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"team.annotators_per_clip = {k!r}: expected an integer >= 1")
    existing = existing or {}
    load = {a: 0 for a in annotators}
    for names in existing.values():
        for a in names:
            if a in load:
                load[a] += 1
    out: dict[str, list[str]] = {}
    for clip in sorted(clips):
        have = existing.get(clip, set())
        need = min(k, len(have | set(annotators))) - len(have)
        free = [a for a in annotators if a not in have]
        if need <= 0 or not free:
            continue
        tie = {a: hashlib.sha256(f"{clip}\0{a}".encode()).hexdigest() for a in free}
        chosen = sorted(free, key=lambda a: (load[a], tie[a]))[:need]
        for a in chosen:
            load[a] += 1
        out[clip] = sorted(chosen)
    return out


def assignments(conn: sqlite3.Connection, active_only: bool = False) -> dict[str, list[str]]:
    """clip -> its annotators (by name); ``active_only``: only active accounts."""
    out: dict[str, list[str]] = {}
    sql = "SELECT a.clip_id, a.annotator FROM assignments a JOIN users u ON u.name = a.annotator"
    sql += " WHERE u.active = 1" if active_only else ""
    for r in conn.execute(sql + " ORDER BY a.clip_id, a.annotator"):
        out.setdefault(r[0], []).append(r[1])
    return out


def annotators_of(conn: sqlite3.Connection, clip_id: str) -> list[str]:
    """The clip's active annotators."""
    return [r[0] for r in conn.execute(
        "SELECT a.annotator FROM assignments a JOIN users u ON u.name = a.annotator "
        "WHERE a.clip_id = ? AND u.active = 1 ORDER BY a.annotator", (clip_id,))]


def queue(conn: sqlite3.Connection, annotator: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT clip_id FROM assignments WHERE annotator = ? ORDER BY clip_id",
                                       (annotator,))]


def assign(conn: sqlite3.Connection, clips: list[str], annotators: list[str], k: int) -> dict[str, list[str]]:
    """Store the assignments of the clips that lack annotators; returns what was added."""
    with transaction(conn):
        active = set(annotators)
        existing = {c: set(a) & active for c, a in assignments(conn).items()}
        new = plan(clips, annotators, k, existing)
        at = now()
        conn.executemany("INSERT INTO assignments VALUES (?, ?, ?)",
                         [(c, a, at) for c, names in new.items() for a in names])
    return new
