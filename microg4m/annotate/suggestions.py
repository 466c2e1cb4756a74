"""The VLM baseline's answers as action suggestions on the labelling page, and what the
annotators made of them.

Where a unit has answers (``results/har_vlm/{unit}.json``, rule ``har_vlm``, found through
the results index and read with :func:`microg4m.formats.vlm_answers.read_answers`), each
tracked person whose answer is ``ok`` and names at least one action gets a suggestion: the
model and its action ids. A person whose request failed, whose answer names no action, or
names an id outside the page's label map or more than ``MAX_ACTIONS`` ids gets none (the
last two are named in the page's problems); a file that cannot be read gives none and is
named there too. The page shows a suggestion pre-ticked and marked as one; nothing is saved
until the annotator clicks.

Every save of a person's labels that changes them while the person has a suggestion records
the suggestion's *outcome* with the save: ``accepted`` (the saved set is exactly the
suggested one), ``edited`` (some suggested actions kept, the set changed), ``removed`` (none
of the suggested actions kept). The latest outcome of each person counts: single-user mode
appends it to a log beside the actions file (:class:`OutcomeLog`), team mode to the history
row of the save (``changes.suggested`` and ``changes.outcome``, team/history.py).
"""

from __future__ import annotations

import csv
import io
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from microg4m.common.atomic import write_text
from microg4m.formats.labels import MAX_ACTIONS
from microg4m.formats.vlm_answers import read_answers
from .errors import Refused
from .store import folder_lock

OUTCOMES = ("accepted", "edited", "removed")
LOG_COLUMNS = ("time", "annotator", "clip_id", "person_id", "model", "prompt_hash", "suggested", "saved", "outcome")


@dataclass(frozen=True)
class Suggestion:
    model: str
    prompt_hash: str
    actions: tuple[int, ...]

    def as_json(self) -> dict:
        return {"model": self.model, "prompt_hash": self.prompt_hash, "actions": list(self.actions)}


def outcome(suggested: Iterable[int], saved: Iterable[int]) -> str:
    """What a save made of a suggestion: accepted, edited or removed."""
    s, k = set(suggested), set(saved)
    if k == s:
        return "accepted"
    return "edited" if k & s else "removed"


def tally(outcomes: Iterable[str]) -> dict:
    """Counts of the outcomes and their shares of all (None when there is none)."""
    got = list(outcomes)
    out: dict = {"suggestions": len(got)}
    for o in OUTCOMES:
        out[f"suggestions_{o}"] = sum(x == o for x in got)
    for o in OUTCOMES:
        out[f"suggestions_{o}_share"] = round(out[f"suggestions_{o}"] / len(got), 4) if got else None
    return out


class Suggestions:
    """(clip, person) -> :class:`Suggestion` from the answers of the current units, re-read
    when a file changed (thread-safe); none at all when not ``enabled`` (config
    ``annotate.suggestions: false``)."""

    def __init__(self, results, label_ids: set[int], enabled: bool = True, detections=None):
        self.results = results  # annotate.results.Results
        self.label_ids = set(label_ids)
        self.enabled = enabled
        self.detections = detections  # detection_suggestions.DetectionSuggestions: they win over the VLM's
        self._lock = threading.Lock()
        self._cache: tuple[tuple, dict, list] = ((), {}, [])
        self._merged: tuple = (None, None, {}, [])

    def _read(self) -> tuple[dict, list]:
        if not self.enabled:
            return {}, []
        found, problems = self._read_vlm()
        if self.detections is None:
            return found, problems
        det, det_problems = self.detections.read()
        with self._lock:
            if self._merged[0] is not found or self._merged[1] is not det:
                self._merged = (found, det, {**found, **det}, problems + det_problems)
            return self._merged[2], self._merged[3]

    def _read_vlm(self) -> tuple[dict, list]:
        index = self.results.index
        stamp = index.stamps("har_vlm")  # as fresh as the index's view: no stat per unit per request
        with self._lock:
            if stamp != self._cache[0]:
                found, problems = {}, []
                for path in (index.files(u).har_vlm for u, st in stamp if st is not None):
                    try:
                        answers = read_answers([path])
                    except ValueError as exc:
                        problems.append(f"{exc}; no suggestions from it")
                        continue
                    for key, rec in answers.items():
                        why, s = self._suggestion(rec)
                        if why:
                            problems.append(f"{path}: {key[0]} person {key[1]}: {why}; no suggestion for this person")
                        elif s is not None:
                            found[key] = s
                self._cache = (stamp, found, problems)
            return self._cache[1], self._cache[2]

    def _suggestion(self, rec: dict) -> tuple[str, Suggestion | None]:
        """(why not, the suggestion): ("", None) for an answer that suggests nothing."""
        if not isinstance(rec, dict) or rec.get("status") != "ok":
            return "", None
        acts = rec.get("actions")
        if not isinstance(acts, list):
            return f"actions {acts!r} is not a list", None
        bad = [a for a in acts if isinstance(a, bool) or not isinstance(a, int) or a not in self.label_ids]
        if bad:
            return f"action id(s) {bad} not in the label map", None
        ids = tuple(dict.fromkeys(acts))
        if len(ids) > MAX_ACTIONS:
            return f"{len(ids)} actions suggested (at most {MAX_ACTIONS} can be saved)", None
        if not ids:
            return "", None
        return "", Suggestion(str(rec.get("model", "")), str(rec.get("prompt_hash", "")), ids)

    def get(self, clip_id, person_id) -> Suggestion | None:
        if not isinstance(clip_id, str) or isinstance(person_id, bool) or not isinstance(person_id, int):
            return None
        return self._read()[0].get((clip_id, person_id))

    def of_clip(self, clip_id: str, persons: list[int]) -> dict[str, dict]:
        """The clip's suggestions as the page gets them: person (text) -> model, actions."""
        found = self._read()[0]
        return {str(p): found[(clip_id, p)].as_json() for p in persons if (clip_id, p) in found}

    def problems(self) -> list[str]:
        return list(self._read()[1])


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def ids_text(ids: Iterable[int]) -> str:
    return " ".join(str(a) for a in ids)


class OutcomeLog:
    """Single-user mode's record of the outcomes: a TSV beside the actions file
    (``actions.csv`` -> ``actions.suggestions.tsv``), one row per save, appended (never
    rewritten otherwise), columns :data:`LOG_COLUMNS`; ``suggested`` and ``saved`` are ids
    separated by spaces."""

    def __init__(self, actions_path: str | os.PathLike, annotator: str = ""):
        p = Path(actions_path)
        self.path = p.with_name(f"{p.stem}.suggestions.tsv")
        self.annotator = annotator

    def record(self, clip_id: str, person_id: int, suggestion: Suggestion, saved: list[int]) -> str:
        """Append the outcome of a save (under the folder lock the labels use); returns it."""
        result = outcome(suggestion.actions, saved)
        row = [now(), self.annotator, clip_id, str(person_id), suggestion.model, suggestion.prompt_hash,
               ids_text(suggestion.actions), ids_text(saved), result]
        try:
            with folder_lock(self.path):
                text = self.path.read_text(encoding="utf-8") if self.path.is_file() else ""
                buf = io.StringIO()
                w = csv.writer(buf, delimiter="\t", lineterminator="\n")
                if not text:
                    w.writerow(LOG_COLUMNS)
                w.writerow(row)
                write_text(self.path, text + buf.getvalue())
        except (OSError, UnicodeDecodeError) as exc:
            raise Refused(500, f"the labels were saved, but the suggestion's outcome could not be recorded in "
                               f"{self.path} ({exc})") from None
        return result

    def latest(self) -> dict[tuple[str, int], dict]:
        """(clip, person) -> the latest row recorded for it."""
        if not self.path.is_file():
            return {}
        try:
            rows = list(csv.DictReader(io.StringIO(self.path.read_text(encoding="utf-8")), delimiter="\t"))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise Refused(500, f"{self.path}: cannot read ({exc}); fix it by hand") from None
        return {(r["clip_id"], int(r["person_id"])): r for r in rows
                if r.get("outcome") in OUTCOMES and (r.get("person_id") or "").isdigit()}

    def summary(self) -> dict:
        return tally(r["outcome"] for r in self.latest().values())
