"""The history of every change, and the latest values it gives.

A *key* is ``(layer, kind, clip, person)``: the layer is an annotator's name or
``@final``; the kinds are ``actions`` (a person's action ids, a JSON list),
``exclusion`` (the clip is excluded; the value is the reason), ``note`` (the
adjudicator's note on the clip) and ``resolved`` (who adjudicated the clip), and for the
captions and QA pairs ``text``, ``text_note`` and ``text_resolved`` (vqa_review.py);
clip-level kinds use person 0. No value (an empty list, an included clip) is stored as NULL.
An annotator's save of a person's actions also keeps, in its row, the VLM suggestion the
person had (``suggested``) and what the save made of it (``outcome``; annotate/suggestions.py);
:func:`outcomes` gives each annotator's latest per person.

:func:`put` appends one row (who, when, key, before, after) and updates ``current`` in
the caller's transaction; :func:`replay` rebuilds every latest value from the history
alone and checks that each row's ``before`` is what the rows before it left;
:func:`repair` mends values that cannot go into a file (text stored before the server
checked it: a lone surrogate, a control character) by appending a change by ``@repair``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from microg4m.common.text import repair_value, value_problem
from .db import REPAIR, now, transaction

KINDS = ("actions", "exclusion", "note", "resolved", "text", "text_note", "text_resolved")  # text*: vqa_review.py
Key = tuple  # (layer, kind, clip_id, person_id)


@dataclass(frozen=True)
class Value:
    value: object  # decoded JSON
    clip_type: str


def encode(value) -> str | None:
    """The stored form of a value; None for 'no value' (empty list, None, excluded=False)."""
    if value is None or value == []:
        return None
    return json.dumps(value, separators=(",", ":"))


def put(conn: sqlite3.Connection, who: str, layer: str, kind: str, clip_id: str, clip_type: str,
        person_id: int, value, suggestion: tuple[dict, str] | None = None) -> int | None:
    """Set a key (inside a transaction). Returns the new history row's seq, or None when
    the key already has this value (nothing is written). ``suggestion``: (the suggestion
    the person had, as JSON, and what this save made of it), kept in the row."""
    assert kind in KINDS and conn.in_transaction
    after = encode(value)
    row = conn.execute("SELECT value FROM current WHERE layer = ? AND kind = ? AND clip_id = ? AND person_id = ?",
                       (layer, kind, clip_id, person_id)).fetchone()
    before = row[0] if row else None
    if before == after:
        return None
    suggested, outcome = (encode(suggestion[0]), suggestion[1]) if suggestion else (None, None)
    seq = conn.execute(
        "INSERT INTO changes (at, who, layer, kind, clip_id, clip_type, person_id, before, after, suggested, outcome) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (now(), who, layer, kind, clip_id, clip_type, person_id, before, after, suggested, outcome)).lastrowid
    if after is None:
        conn.execute("DELETE FROM current WHERE layer = ? AND kind = ? AND clip_id = ? AND person_id = ?",
                     (layer, kind, clip_id, person_id))
    else:
        conn.execute(
            "INSERT INTO current VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (layer, kind, clip_id, person_id) "
            "DO UPDATE SET value = excluded.value, clip_type = excluded.clip_type, seq = excluded.seq",
            (layer, kind, clip_id, person_id, clip_type, after, seq))
    return seq


def get(conn: sqlite3.Connection, layer: str, kind: str, clip_id: str, person_id: int = 0, default=None):
    row = conn.execute("SELECT value FROM current WHERE layer = ? AND kind = ? AND clip_id = ? AND person_id = ?",
                       (layer, kind, clip_id, person_id)).fetchone()
    return json.loads(row[0]) if row else default


def current(conn: sqlite3.Connection, layer: str | None = None, clip_id: str | None = None) -> dict[Key, Value]:
    """Latest values from the ``current`` table (optionally of one layer and/or clip)."""
    sql, args = "SELECT * FROM current WHERE 1", []
    if layer is not None:
        sql, args = sql + " AND layer = ?", args + [layer]
    if clip_id is not None:
        sql, args = sql + " AND clip_id = ?", args + [clip_id]
    return {(r["layer"], r["kind"], r["clip_id"], r["person_id"]): Value(json.loads(r["value"]), r["clip_type"])
            for r in conn.execute(sql, args)}


def ordinal(conn: sqlite3.Connection, layer: str, seq: int | None) -> int | None:
    """The number of the row ``seq`` among the rows of ``layer`` (1 for its first change):
    what an annotator is told of their own change. A global seq would not do: the gaps
    between one's own seqs count the rows others wrote in between, the final labels
    included, and so tell whether the co-annotators chose the same."""
    if seq is None:
        return None
    return conn.execute("SELECT COUNT(*) FROM changes WHERE layer = ? AND seq <= ?", (layer, seq)).fetchone()[0]


def outcomes(conn: sqlite3.Connection, layer: str | None = None) -> dict[tuple[str, str, int], str]:
    """(annotator, clip, person) -> the outcome of the latest save that recorded one
    (suggestions.py): what each annotator (or only ``layer``) made of each suggestion."""
    out = {}
    sql = "SELECT layer, clip_id, person_id, outcome FROM changes WHERE kind = 'actions' AND outcome IS NOT NULL"
    args = () if layer is None else (layer,)
    for r in conn.execute(sql + (" AND layer = ?" if layer is not None else "") + " ORDER BY seq", args):
        out[(r[0], r[1], r[2])] = r[3]
    return out


class HistoryError(ValueError):
    """The history contradicts itself (a row's ``before`` is not what came before it)."""


def replay(conn: sqlite3.Connection) -> dict[Key, Value]:
    """Every latest value, from the history rows alone (in seq order)."""
    state: dict[Key, tuple[str, str]] = {}
    for r in conn.execute("SELECT * FROM changes ORDER BY seq"):
        key = (r["layer"], r["kind"], r["clip_id"], r["person_id"])
        had = state.get(key, (None, ""))[0]
        if had != r["before"]:
            raise HistoryError(f"history row {r['seq']}: before={r['before']!r} but the rows before it give {had!r}")
        if r["after"] is None:
            state.pop(key, None)
        else:
            state[key] = (r["after"], r["clip_type"])
    return {k: Value(json.loads(v), t) for k, (v, t) in state.items()}


def rows(conn: sqlite3.Connection, since: int = 0, clip_id: str | None = None, who: str | None = None) -> list[dict]:
    sql, args = "SELECT * FROM changes WHERE seq > ?", [since]
    if clip_id is not None:
        sql, args = sql + " AND clip_id = ?", args + [clip_id]
    if who is not None:
        sql, args = sql + " AND who = ?", args + [who]
    return [dict(r) for r in conn.execute(sql + " ORDER BY seq", args)]


def unwritable(values: dict[Key, Value]) -> dict[Key, str]:
    """The latest values that hold text no file can take (key -> why)."""
    return {k: why for k, v in values.items() if (why := value_problem(v.value)) is not None}


def repair(conn: sqlite3.Connection) -> list[Key]:
    """Append, by ``@repair``, the mended value of every latest value that no file can take
    (lone surrogates become U+FFFD, other control characters a space); returns their keys.
    The history keeps the rows as they were: nothing is updated or deleted."""
    with transaction(conn):
        bad = unwritable(current(conn))
        for (layer, kind, clip, person) in sorted(bad):
            v = current(conn, layer, clip)[(layer, kind, clip, person)]
            put(conn, REPAIR, layer, kind, clip, v.clip_type, person, repair_value(v.value))
    return sorted(bad)
