"""Labels coming back from a labelling tool, checked and written into an actions file as the
labelling page writes it, and everything refused, each with its file, clip, person and reason.

A person's labels are checked as the page checks a save (a kept clip of the run, a person
with a box, or one the same import draws; ids of the label map, at most ``MAX_ACTIONS``)
and then written, all in one write under the page's lock, by
:meth:`microg4m.annotate.store.Store.replace_many`: a person's set replaces its rows where
they were, a new person's rows go after its clip's. Whatever is refused leaves the file as
it was for that person; the rest goes on.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import pandas as pd

from microg4m.common.atomic import write_tsv
from microg4m.formats.labels import MAX_ACTIONS
from microg4m.formats.results_index import ResultsIndex
from .errors import Refused
from .results import Results
from .store import Store

REPORT_COLUMNS = ["file", "clip_id", "person_id", "reason"]


@dataclass
class Intake:
    index: ResultsIndex
    label_ids: set[int]
    sets: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    source: dict[tuple[str, int], str] = field(default_factory=dict)
    refused: list[tuple[str, str, str, str]] = field(default_factory=list)
    drawn: set[tuple[str, int]] = field(default_factory=set)  # persons a correction of this import adds

    def refuse(self, file, clip_id="", person_id="", reason="") -> None:
        row = (str(file), str(clip_id), str(person_id), " ".join(str(reason).split()))
        self.refused.append(row)
        where = ", ".join(x for x in (row[1], f"person {row[2]}" if row[2] else "") if x)
        print(f"labels import: {row[0]}: {where + ': ' if where else ''}{row[3]}", file=sys.stderr)

    def clip(self, file, clip_id: str):
        """The kept clip, or None (refused, with the reason)."""
        clip = self.index.get(clip_id)
        if clip is None:
            self.refuse(file, clip_id, "", f"clip {clip_id!r} is no clip of {self.index.root}")
        elif not clip.kept:
            self.refuse(file, clip_id, "", f"clip {clip_id} is not kept ({clip.reason or clip.trim_reason or 'no decision'})")
        else:
            return clip
        return None

    def add(self, file, clip_id: str, person_id: int, ids: list[int]) -> None:
        """One person's labels as the tool has them (refused with the reason when unusable)."""
        if self.clip(file, clip_id) is None:
            return
        if person_id not in self.index.persons(clip_id) and (clip_id, person_id) not in self.drawn:
            return self.refuse(file, clip_id, person_id, f"person {person_id} has no box in {clip_id}")
        unknown = [a for a in ids if a not in self.label_ids]
        if unknown:
            return self.refuse(file, clip_id, person_id, f"action id(s) {unknown} not in the label map")
        if len(ids) > MAX_ACTIONS:
            return self.refuse(file, clip_id, person_id, f"{len(ids)} actions (at most {MAX_ACTIONS})")
        key = (clip_id, person_id)
        if key in self.sets and sorted(self.sets[key]) != sorted(ids):
            return self.refuse(file, clip_id, person_id, f"labelled again, differently, in {self.source[key]} "
                                                         "(the first kept)")
        self.sets.setdefault(key, ids)
        self.source.setdefault(key, str(file))

    def write(self, actions, screening) -> dict:
        """Write the accepted labels into ``actions``; the summary (the refusals too)."""
        try:
            store = Store(Results(self.index.root), actions, screening, self.label_ids)
        except Refused as exc:
            raise ValueError(exc.message) from None
        types = {c: self.index.clip(c).clip_type for c, _ in self.sets}
        done = store.replace_many(dict(sorted(self.sets.items())), types)  # clip and person order
        for clip_id, pid in done["excluded"]:
            self.refuse(self.source[(clip_id, pid)], clip_id, pid, f"clip {clip_id} is excluded by hand "
                                                                   f"({screening}); include it again first")
        return {"persons": len(self.sets), "changed": done["changed"], "unchanged": done["unchanged"],
                "refused": len(self.refused), "actions": str(actions)}

    def write_report(self, path) -> None:
        write_tsv(path, pd.DataFrame(self.refused, columns=REPORT_COLUMNS))
