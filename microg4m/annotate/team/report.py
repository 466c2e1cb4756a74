"""Agreement figures of the team, with the measures of ``microg4m agreement``.

Each annotator's labels on the clips they are done with and did not exclude are one
"file" of agreement.compare (per clip, per action, per annotator; see agreement.py). Team
mode adds, per annotator: ``done`` clips, ``excluded`` clips, ``exclusion_differs`` (done
clips where a co-annotator who is done decided the other way on exclusion) and
``changed_by_final`` (their labels the final labels dropped, plus final labels they did
not give, plus exclusion decisions the final reversed, on clips with final labels), and
what they made of the VLM's suggestions (suggestions.py: ``suggestions``, the persons they
saved with one, and ``suggestions_{accepted,edited,removed}`` with their ``_share``; the
same over every annotator in the summary).

The report folder gets ``actions.<annotator>.csv`` (exactly the labels compared, so
``microg4m agreement`` over them gives the same per-clip and per-action figures),
``agreement_{clips,actions,annotators}.tsv``, ``adjudication.tsv`` (every clip: status,
annotators, who set the final labels, the note) and ``summary.json``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from microg4m.common.atomic import write_text, write_tsv
from microg4m.formats.labels import ACTIONS_COLUMNS
from ..agreement import CLIP_COLUMNS, ClipMeasures, Labels, Totals, clip_measures
from ..suggestions import tally
from .db import FINAL
from .decisions import STATUSES, Snapshot, decision, status


def _clean(records: list[dict]) -> list[dict]:
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in records]


EXTRA = ("done", "excluded", "exclusion_differs", "changed_by_final")


@dataclass
class ClipPart:
    """What one assigned clip adds to the figures (:func:`clip_part`); the figures of many
    clips are the sums of their parts (:class:`Sums`), so a page can keep the parts and
    make again only those of the clips that changed."""

    clip_id: str
    persons: list[int]
    names: list[str]  # its active annotators
    status: str
    final_by: str
    note: str
    clip_type: str
    labels: list[tuple[str, dict[int, list[int]]]]  # the labels compared: (annotator, person -> actions)
    measures: ClipMeasures | None  # None: no annotator is done with labels
    extra: dict[str, list[int]]  # annotator -> [done, excluded, exclusion_differs, changed_by_final]


def clip_part(snap: Snapshot, clip: str, persons: list[int], names: list[str], annotators: list[str],
              final: dict[int, list[int]] | None = None) -> ClipPart:
    """The part of one clip (pure); ``snap`` needs to hold that clip's values only.
    ``final``: the clip's final actions (person -> ids), when known (else looked up in ``snap``)."""
    active = set(annotators)
    done = {a: d for a in names if a in active and (d := decision(snap, a, clip, persons)) is not None}
    labels = [(a, {p: list(snap.layer_actions(a).get((clip, p), ())) for p in persons})
              for a in annotators if a in done and done[a][0] == "labels"]
    final_excl = snap.layer_excluded(FINAL)
    if final is None:
        final = {p: acts for (c, p), acts in snap.layer_actions(FINAL).items() if c == clip}
    has_final = clip in final_excl or bool(final)
    extra = {}
    for a, d in done.items():
        others = [o for b, o in done.items() if b != a]
        changed = 0
        if has_final:
            if (clip in final_excl) != (d[0] == "excluded"):
                changed = 1
            elif d[0] == "labels":
                own = {(p, x) for p, acts in d[1] for x in acts}
                changed = len(own ^ {(p, x) for p, acts in final.items() for x in acts})
        extra[a] = [1, int(d[0] == "excluded"), int(any((o[0] == "excluded") != (d[0] == "excluded") for o in others)),
                    changed]
    return ClipPart(clip, list(persons), list(names), status(snap, clip, persons, names), snap.resolved.get(clip, ""),
                    snap.notes.get(clip, ""), snap.clip_type.get(clip, ""), labels,
                    clip_measures(clip, labels) if labels else None, extra)


class Sums:
    """The sums of clip parts over ``annotators`` (the files compared, in order)."""

    def __init__(self, annotators: list[str]):
        self.annotators = list(annotators)
        self.totals = Totals()
        self.extra = {a: [0] * len(EXTRA) for a in annotators}
        self.counts = {s: 0 for s in STATUSES}
        self.assigned = 0

    def add(self, part: ClipPart, sign: int = 1) -> None:
        self.assigned += sign
        self.counts[part.status] += sign
        if part.measures is not None:
            self.totals.add(part.measures, sign)
        for a, counts in part.extra.items():
            mine = self.extra.setdefault(a, [0] * len(EXTRA))
            for i, n in enumerate(counts):
                mine[i] += sign * n

    def tables(self, label_map: pd.DataFrame, report_dir: Path | None = None, outcomes: dict | None = None) -> dict:
        """``summary``, ``actions`` and ``annotators`` of the figures; with what the annotators
        made of the suggestions (``outcomes``: (annotator, clip, person) -> outcome)."""
        outcomes = {k: o for k, o in (outcomes or {}).items() if k[0] in self.annotators}
        paths = [(a, str((report_dir or Path(".")) / f"actions.{a}.csv")) for a in self.annotators]
        ann = self.totals.annotators(paths).merge(pd.DataFrame(
            [{"annotator": a, **dict(zip(EXTRA, self.extra.get(a, [0] * len(EXTRA)))),
              **tally(o for k, o in outcomes.items() if k[0] == a)} for a in self.annotators],
            columns=["annotator", *EXTRA, *tally([])]), on="annotator", how="right")
        summary = self.totals.summary(len(self.annotators), "majority", label_map)
        summary.update(clips_assigned=self.assigned, **{f"clips_{k}": v for k, v in self.counts.items()},
                       **tally(outcomes.values()))
        return {"summary": summary, "actions": self.totals.actions(label_map), "annotators": ann}


def figures(snap: Snapshot, assigned: dict[str, list[str]], persons_of, annotators: list[str],
            label_map: pd.DataFrame, report_dir: Path | None = None, outcomes: dict | None = None) -> dict:
    """Everything the page shows and the report writes (pure; ``persons_of(clip)``): the
    sums of every assigned clip's :func:`clip_part`; ``outcomes``: (annotator, clip, person)
    -> what they made of a suggestion (history.outcomes)."""
    sums = Sums(annotators)
    files = {a: Labels((report_dir or Path(".")) / f"actions.{a}.csv", a) for a in annotators}
    clip_rows, adjudication = [], []
    finals: dict[str, dict[int, list[int]]] = {}
    for (c, p), acts in snap.layer_actions(FINAL).items():
        finals.setdefault(c, {})[p] = acts
    for clip in sorted(assigned):
        part = clip_part(snap, clip, persons_of(clip), assigned[clip], annotators, finals.get(clip, {}))
        sums.add(part)
        for a, acts in part.labels:
            files[a].clip_type[clip] = part.clip_type
            for p, ids in acts.items():
                files[a].persons[(clip, p)] = ids
        if part.measures is not None:
            clip_rows.append(part.measures.row)
        adjudication.append({"clip_id": clip, "status": part.status, "annotators": ",".join(part.names),
                             "final_by": part.final_by, "note": part.note})
    return {**sums.tables(label_map, report_dir, outcomes), "files": list(files.values()),
            "clips": pd.DataFrame(clip_rows, columns=CLIP_COLUMNS),
            "adjudication": pd.DataFrame(adjudication, columns=["clip_id", "status", "annotators", "final_by",
                                                                "note"])}


def as_json(fig: dict) -> dict:
    return {"summary": fig["summary"], "annotators": _clean(fig["annotators"].to_dict("records")),
            "actions": _clean(fig["actions"].to_dict("records"))}


def write(fig: dict, report_dir: str | Path) -> list[str]:
    """Write the report files (atomically); returns their paths."""
    out = Path(report_dir)
    written = []
    for lab in fig["files"]:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(ACTIONS_COLUMNS)
        for (clip, p), acts in sorted(lab.persons.items()):
            w.writerows([clip, lab.clip_type[clip], p, a] for a in acts)
        path = out / f"actions.{lab.name}.csv"
        write_text(path, buf.getvalue())
        written.append(path)
    for name in ("clips", "actions", "annotators", "adjudication"):
        path = out / (f"agreement_{name}.tsv" if name != "adjudication" else "adjudication.tsv")
        write_tsv(path, fig[name])
        written.append(path)
    path = out / "summary.json"
    write_text(path, json.dumps(fig["summary"], indent=2) + "\n")
    return [str(p) for p in written + [path]]
