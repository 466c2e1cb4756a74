"""Labels per layer, each annotator's decision on a clip, its status, and the final labels.

An annotator is *done* with a clip when they excluded it or gave every tracked person
at least one action (the single-user page's rule); their *decision* is then "excluded"
or each person's set of actions (order does not matter, an exclusion reason does not).
The status of an assigned clip:

* ``pending``: an annotator of the clip is not done;
* ``agreed``: all are done with the same decision; the final labels are that decision
  (set by ``@auto``, and withdrawn by ``@auto`` when an annotator changes their mind);
* ``disagree``: all are done but their decisions differ: no final labels until an
  adjudicator sets them;
* ``resolved``: an adjudicator set the final labels; they stay whatever the annotators
  do later, until an adjudicator changes them.

Every function that writes runs inside the caller's transaction and returns the seqs of
the history rows it appended.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from microg4m.formats.labels import MAX_ACTIONS
from ..errors import Refused
from ..store import MAX_REASON
from ..suggestions import outcome
from . import history
from .db import AUTO, FINAL

STATUSES = ("pending", "agreed", "disagree", "resolved")


@dataclass
class Snapshot:
    """Latest values, grouped: layer -> (clip, person) -> actions; layer -> clip -> reason."""

    actions: dict[str, dict[tuple[str, int], list[int]]] = field(default_factory=dict)
    excluded: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # final layer: clip -> note
    resolved: dict[str, str] = field(default_factory=dict)  # final layer: clip -> adjudicator
    clip_type: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, values: dict) -> "Snapshot":
        snap = cls()
        for (layer, kind, clip, person), v in sorted(values.items()):
            if kind == "actions":
                snap.actions.setdefault(layer, {})[(clip, person)] = list(v.value)
                snap.clip_type.setdefault(clip, v.clip_type)
            elif kind == "exclusion":
                snap.excluded.setdefault(layer, {})[clip] = v.value
            elif kind == "note" and layer == FINAL:
                snap.notes[clip] = v.value
            elif kind == "resolved" and layer == FINAL:
                snap.resolved[clip] = v.value
        return snap

    @classmethod
    def read(cls, conn: sqlite3.Connection, layer: str | None = None, clip_id: str | None = None) -> "Snapshot":
        return cls.of(history.current(conn, layer, clip_id))

    def layer_actions(self, layer: str, clip: str | None = None) -> dict[tuple[str, int], list[int]]:
        acts = self.actions.get(layer, {})
        return acts if clip is None else {k: v for k, v in acts.items() if k[0] == clip}

    def layer_excluded(self, layer: str) -> dict[str, str]:
        return self.excluded.get(layer, {})


def decision(snap: Snapshot, layer: str, clip: str, persons: list[int]):
    """The annotator's decision on the clip, or None while they are not done."""
    if clip in snap.layer_excluded(layer):
        return ("excluded",)
    acts = snap.layer_actions(layer)
    sets = tuple((p, frozenset(acts.get((clip, p), ()))) for p in persons)
    if persons and all(s for _, s in sets):
        return ("labels", sets)
    return None


def status(snap: Snapshot, clip: str, persons: list[int], assigned: list[str]) -> str:
    if clip in snap.resolved:
        return "resolved"
    decs = [decision(snap, a, clip, persons) for a in assigned]
    if not decs or any(d is None for d in decs):
        return "pending"
    return "agreed" if all(d == decs[0] for d in decs) else "disagree"


# ---------------------------------------------------------------- checks (as store.py words them; reasons: store.check_reason)


def check_person(persons: list[int], clip_id: str, person_id) -> int:
    if isinstance(person_id, bool) or not isinstance(person_id, int):
        raise Refused(400, f"person_id must be an integer, got {person_id!r}")
    if person_id not in persons:
        raise Refused(404, f"person {person_id} has no box in clip {clip_id}")
    return person_id


def check_action(label_ids: set[int], action) -> int:
    if isinstance(action, bool) or not isinstance(action, int):
        raise Refused(400, f"action must be an integer id, got {action!r}")
    if action not in label_ids:
        raise Refused(422, f"unknown action id {action} (not in the label map)")
    return action


# ---------------------------------------------------------------- an annotator's changes


def change_action(conn: sqlite3.Connection, who: str, clip, persons: list[int], person_id: int, action: int,
                  add: bool, suggestion=None) -> tuple[list[int], list[int]]:
    """Add or remove one action of a person in ``who``'s layer; returns (actions, seqs).
    ``suggestion``: the person's (suggestions.Suggestion), whose outcome the save records."""
    mine = history.get(conn, who, "actions", clip.clip_id, person_id, [])
    if add:
        if history.get(conn, who, "exclusion", clip.clip_id) is not None:
            raise Refused(409, f"clip {clip.clip_id} is excluded; include it again before labelling")
        if action in mine:
            return mine, []
        if len(mine) >= MAX_ACTIONS:
            raise Refused(409, f"person {person_id} in {clip.clip_id} already has {MAX_ACTIONS} actions "
                               f"(the most allowed); remove one first")
        new = mine + [action]
    else:
        new = [a for a in mine if a != action]
    return new, _put_actions(conn, who, clip, person_id, mine, new, suggestion)


def set_actions(conn: sqlite3.Connection, who: str, clip, person_id: int, actions: list[int],
                suggestion=None) -> tuple[list[int], list[int]]:
    """Make a person's actions in ``who``'s layer exactly ``actions`` (checked ids) in one
    save (a suggestion saved as the page shows it); returns (actions, seqs)."""
    mine = history.get(conn, who, "actions", clip.clip_id, person_id, [])
    if len(actions) > MAX_ACTIONS:
        raise Refused(409, f"{len(actions)} actions for person {person_id} in {clip.clip_id} (at most {MAX_ACTIONS})")
    if actions and history.get(conn, who, "exclusion", clip.clip_id) is not None:
        raise Refused(409, f"clip {clip.clip_id} is excluded; include it again before labelling")
    return actions, _put_actions(conn, who, clip, person_id, mine, actions, suggestion)


def _put_actions(conn, who: str, clip, person_id: int, before: list[int], after: list[int], suggestion) -> list[int]:
    """Store a person's new actions, with the suggestion's outcome when they changed."""
    hint = None
    if suggestion is not None and set(before) != set(after):
        hint = (suggestion.as_json(), outcome(suggestion.actions, after))
    seq = history.put(conn, who, who, "actions", clip.clip_id, clip.clip_type, person_id, after, suggestion=hint)
    return [seq] if seq else []


def change_exclusion(conn: sqlite3.Connection, who: str, clip, excluded: bool, reason: str) -> list[int]:
    seq = history.put(conn, who, who, "exclusion", clip.clip_id, clip.clip_type, 0, reason if excluded else None)
    return [seq] if seq else []


# ---------------------------------------------------------------- the final labels


def _write_final(conn: sqlite3.Connection, who: str, clip, exclusion: str | None,
                 actions: dict[int, list[int]]) -> list[int]:
    """Make the clip's final labels exactly ``exclusion`` and ``actions`` (others cleared)."""
    had = {p for (c, p) in Snapshot.read(conn, FINAL, clip.clip_id).layer_actions(FINAL)}
    seqs = [history.put(conn, who, FINAL, "exclusion", clip.clip_id, clip.clip_type, 0, exclusion)]
    for p in sorted(had | set(actions)):
        seqs.append(history.put(conn, who, FINAL, "actions", clip.clip_id, clip.clip_type, p, actions.get(p, [])))
    return [s for s in seqs if s]


def settle(conn: sqlite3.Connection, clip, persons: list[int], assigned: list[str]) -> list[int]:
    """Bring an unresolved clip's final labels in line with its annotators (``@auto``)."""
    snap = Snapshot.read(conn, clip_id=clip.clip_id)
    if clip.clip_id in snap.resolved:
        return []
    exclusion, actions = None, {}
    if status(snap, clip.clip_id, persons, assigned) == "agreed":
        if clip.clip_id in snap.layer_excluded(assigned[0]):
            reasons = [snap.layer_excluded(a)[clip.clip_id] for a in assigned]
            exclusion = "; ".join(dict.fromkeys(r for r in reasons if r))[:MAX_REASON]
        else:
            actions = {p: snap.layer_actions(assigned[0])[(clip.clip_id, p)] for p in persons}
    return _write_final(conn, AUTO, clip, exclusion, actions)


def set_final(conn: sqlite3.Connection, who: str, clip, exclusion: str | None, actions: dict[int, list[int]],
              note: str) -> list[int]:
    """An adjudicator's final labels for the clip (an exclusion clears its actions)."""
    seqs = _write_final(conn, who, clip, exclusion, {} if exclusion is not None else actions)
    for kind, value in (("note", note or None), ("resolved", who)):
        seq = history.put(conn, who, FINAL, kind, clip.clip_id, clip.clip_type, 0, value)
        seqs += [seq] if seq else []
    return seqs
