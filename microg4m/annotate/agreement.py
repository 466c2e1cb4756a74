"""Agreement between annotators' actions files, and their merge (``microg4m agreement``).

Each input is an actions CSV in the released schema (one per annotator). A clip's
*annotators* are the files with at least one row for it; a person's *votes* for an
action are the number of those files that give it the action (a file that labels the
clip but not the person votes "no"). Measures:

* per clip (``agreement_clips.tsv``): ``persons`` labelled by anyone, ``exact_persons``
  and ``exact_share``: persons whose action sets are identical in every file (share
  empty for a clip only one file labelled);
  ``labels_union`` / ``labels_agreed``: (person, action) labels chosen by any / by all
  files; ``differing`` = union - agreed; ``merged`` labels and ``dropped_over_limit``.
* per action (``agreement_actions.tsv``): over every pair of files and every person of
  a clip both labelled, ``both`` / ``one_only`` counts, the positive (specific)
  agreement ``2·both / (2·both + one_only)`` and Cohen's kappa of the 2×2 table of the
  pooled pairs (empty when undefined, e.g. the action was never chosen).
* per annotator (``agreement_annotators.tsv``, like the released cross-check table):
  ``labels`` given, ``differing`` labels on its clips that not every annotator of the
  clip chose, and ``corrected``: its labels the merge removed plus merged labels it
  did not give (the changes the merge made to its file).

Merge: a person keeps an action with ``union`` at least 1 vote, ``majority`` (default)
more than half of the clip's annotators, ``all`` every annotator. With two annotators,
majority = both agree. A clip labelled by one file keeps its labels under every rule.
More than five kept actions: the five with the most votes (then first seen) stay.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import pandas as pd

from microg4m.common.atomic import write_text, write_tsv
from microg4m.formats.labels import MAX_ACTIONS
from microg4m.formats.labels import ACTIONS_COLUMNS, read_actions, read_label_map

RULES = ("majority", "union", "all")


@dataclass
class Labels:
    """One annotator's file: ``(clip, person) -> [actions]`` (first-seen order)."""

    path: Path
    name: str
    persons: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    clip_type: dict[str, str] = field(default_factory=dict)

    def clips(self) -> set[str]:
        return set(self.clip_type)


def annotator_name(path: Path) -> str:
    """``annotations/actions.alice.csv`` -> ``alice``; other files -> their name."""
    m = re.fullmatch(r"actions\.(.+)\.csv", path.name)
    return m.group(1) if m else path.name


def read_labels(path: str | os.PathLike, label_ids: set[int]) -> Labels:
    """One actions file, strictly checked (ValueError with file:line on the first problem)."""
    path = Path(path)
    out = Labels(path, annotator_name(path))
    for r in read_actions(path).itertuples(index=False):
        where = f"{path}:{r.line}"
        if r.fields != len(ACTIONS_COLUMNS):
            raise ValueError(f"{where}: {r.fields} fields, expected {len(ACTIONS_COLUMNS)}")
        if not r.video_id:
            raise ValueError(f"{where}: empty video_id")
        if r.movie_or_real not in ("m", "r"):
            raise ValueError(f"{where}: movie_or_real must be m or r, got {r.movie_or_real!r}")
        if not (r.person_id.isdigit() and int(r.person_id) > 0):
            raise ValueError(f"{where}: person_id {r.person_id!r} is not a positive integer")
        if not re.fullmatch(r"\d+", r.action) or int(r.action) not in label_ids:
            raise ValueError(f"{where}: unknown action {r.action!r} (not an id of the label map)")
        if out.clip_type.setdefault(r.video_id, r.movie_or_real) != r.movie_or_real:
            raise ValueError(f"{where}: {r.video_id} is {r.movie_or_real!r} here but "
                             f"{out.clip_type[r.video_id]!r} on an earlier line")
        acts = out.persons.setdefault((r.video_id, int(r.person_id)), [])
        if int(r.action) not in acts:
            acts.append(int(r.action))
    return out


def _kappa(a: int, b: int, c: int, d: int) -> float | None:
    """Cohen's kappa of a 2×2 table (a: both yes, d: both no); None when undefined."""
    n = a + b + c + d
    if n == 0:
        return None
    po = (a + d) / n
    pe = ((a + b) * (a + c) + (c + d) * (b + d)) / (n * n)
    return None if pe >= 1 else (po - pe) / (1 - pe)


@dataclass
class ClipMeasures:
    """What one clip adds to the measures (see :func:`clip_measures`); every count adds up
    over clips, so the figures of many clips are the sums of theirs (:class:`Totals`)."""

    row: dict  # its agreement_clips row
    merged: dict[int, list[int]]  # person -> the merge's actions
    items: int  # (pair of files, person) items: each adds one to a, b, c or d of every action
    tables: dict[int, list[int]]  # action -> [both, first file only, second file only], over those items
    chosen: dict[int, int]  # action -> (file, person) that chose it
    files: dict[str, list[int]]  # file name -> [clips, labels, differing, corrected]


def clip_measures(clip: str, sets: list[tuple[str, dict[int, list[int]]]], rule: str = "majority") -> ClipMeasures:
    """The measures of one clip (pure). ``sets``: the files that label the clip, in the order
    of the files, each as (name, person -> actions; a person missing: no action)."""
    m = len(sets)
    persons = sorted({p for _, acts in sets for p in acts})
    need = {"union": 1, "majority": m // 2 + 1, "all": m}[rule]
    exact = union = agreed = kept_total = dropped = 0
    merged: dict[int, list[int]] = {}
    for p in persons:
        lists = [acts.get(p, []) for _, acts in sets]
        order = list(dict.fromkeys(a for s in lists for a in s))
        votes = {a: sum(a in s for s in lists) for a in order}
        exact += all(set(s) == set(lists[0]) for s in lists)
        union += len(order)
        agreed += sum(v == m for v in votes.values())
        keep = [a for a in order if votes[a] >= need]
        if len(keep) > MAX_ACTIONS:
            ranked = sorted(keep, key=lambda a: (-votes[a], order.index(a)))[:MAX_ACTIONS]
            dropped += len(keep) - MAX_ACTIONS
            keep = [a for a in keep if a in ranked]
        kept_total += len(keep)
        merged[p] = keep
    row = {"clip_id": clip, "annotators": m, "persons": len(persons), "exact_persons": exact,
           "exact_share": round(exact / len(persons), 4) if persons and m > 1 else None,
           "labels_union": union, "labels_agreed": agreed, "differing": union - agreed,
           "merged": kept_total, "dropped_over_limit": dropped}
    # per action: the 2×2 tables over every pair of files and every person either labelled
    items, tables = 0, {}
    for (_, fa), (_, fb) in combinations(sets, 2):
        for p in set(fa) | set(fb):
            items += 1
            sa, sb = set(fa.get(p, ())), set(fb.get(p, ()))
            for a in sa | sb:
                t = tables.setdefault(a, [0, 0, 0])
                t[0 if a in sa and a in sb else 1 if a in sa else 2] += 1
    chosen: dict[int, int] = {}
    files = {}
    mine = {(p, a) for p, acts in merged.items() for a in acts}
    for name, acts in sets:
        own = {(p, a) for p, s in acts.items() for a in s}
        for p, s in acts.items():
            for a in set(s):
                chosen[a] = chosen.get(a, 0) + 1
        files[name] = [1, len(own), union - agreed if m > 1 else 0, len(own ^ mine)]
    return ClipMeasures(row, merged, items, tables, chosen, files)


class Totals:
    """The sums of clips' measures; :meth:`add` a clip's (``sign=-1`` takes it off again)."""

    def __init__(self):
        self.items = 0
        self.tables: dict[int, list[int]] = {}
        self.chosen: dict[int, int] = {}
        self.files: dict[str, list[int]] = {}
        self.clips = self.shared = self.persons_shared = self.exact_shared = self.differing = self.merged = 0

    def add(self, cm: ClipMeasures, sign: int = 1) -> None:
        self.items += sign * cm.items
        for a, t in cm.tables.items():
            mine = self.tables.setdefault(a, [0, 0, 0])
            for i in range(3):
                mine[i] += sign * t[i]
        for a, n in cm.chosen.items():
            self.chosen[a] = self.chosen.get(a, 0) + sign * n
        for name, counts in cm.files.items():
            mine = self.files.setdefault(name, [0, 0, 0, 0])
            for i in range(4):
                mine[i] += sign * counts[i]
        r = cm.row
        self.clips += sign
        self.merged += sign * r["merged"]
        if r["annotators"] > 1:
            self.shared += sign
            self.persons_shared += sign * r["persons"]
            self.exact_shared += sign * r["exact_persons"]
            self.differing += sign * r["differing"]

    def actions(self, label_map: pd.DataFrame) -> pd.DataFrame:
        rows = []
        for r in label_map.itertuples(index=False):
            a, b, c = self.tables.get(int(r.id), (0, 0, 0))
            kappa = _kappa(a, b, c, self.items - a - b - c)
            rows.append({
                "action_id": int(r.id), "name": r.name, "label_type": r.label_type,
                "chosen": self.chosen.get(int(r.id), 0), "both": a, "one_only": b + c,
                "positive_agreement": round(2 * a / (2 * a + b + c), 4) if a + b + c else None,
                "kappa": round(kappa, 4) if kappa is not None else None,
            })
        return pd.DataFrame(rows, columns=[
            "action_id", "name", "label_type", "chosen", "both", "one_only", "positive_agreement", "kappa"])

    def annotators(self, files: list[tuple[str, str]]) -> pd.DataFrame:
        """``files``: (name, path) of every file, in order."""
        rows = []
        for name, path in files:
            clips, labels, differing, corrected = self.files.get(name, (0, 0, 0, 0))
            rows.append({"annotator": name, "file": path, "clips": clips, "labels": labels, "differing": differing,
                         "corrected": corrected})
        return pd.DataFrame(rows, columns=["annotator", "file", "clips", "labels", "differing", "corrected"])

    def summary(self, files: int, rule: str, label_map: pd.DataFrame) -> dict:
        ids = [int(i) for i in label_map["id"]]
        tot = [sum(self.tables.get(a, (0, 0, 0))[i] for a in ids) for i in range(3)]
        return {
            "files": files, "rule": rule, "clips": self.clips, "clips_shared": self.shared,
            "persons_shared": self.persons_shared,
            "exact_share": round(self.exact_shared / self.persons_shared, 4) if self.persons_shared else None,
            "differing": self.differing,
            "positive_agreement": round(2 * tot[0] / (2 * tot[0] + tot[1] + tot[2]), 4) if sum(tot) else None,
            "merged_rows": self.merged,
        }


CLIP_COLUMNS = ["clip_id", "annotators", "persons", "exact_persons", "exact_share", "labels_union", "labels_agreed",
                "differing", "merged", "dropped_over_limit"]


def compare(files: list[Labels], label_map: pd.DataFrame, rule: str = "majority"):
    """Measures and merge (pure): the sums of every clip's :func:`clip_measures`. Returns
    (merged rows, clips, actions, annotators, summary)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    clip_type: dict[str, str] = {}
    for f in files:
        for clip, t in f.clip_type.items():
            if clip_type.setdefault(clip, t) != t:
                raise ValueError(f"{clip} is {t!r} in {f.path} but {clip_type[clip]!r} in another file")
    by_clip: list[dict[str, dict[int, list[int]]]] = []  # per file: clip -> person -> actions
    for f in files:
        mine: dict[str, dict[int, list[int]]] = {c: {} for c in f.clip_type}
        for (c, p), acts in f.persons.items():
            mine.setdefault(c, {})[p] = acts
        by_clip.append(mine)
    totals, merged_rows, clip_rows = Totals(), [], []
    for clip in sorted(clip_type):
        cm = clip_measures(clip, [(f.name, mine[clip]) for f, mine in zip(files, by_clip) if clip in f.clip_type],
                           rule)
        totals.add(cm)
        clip_rows.append(cm.row)
        merged_rows += [(clip, clip_type[clip], p, a) for p, keep in cm.merged.items() for a in keep]
    clips_df = pd.DataFrame(clip_rows, columns=CLIP_COLUMNS)
    ann_df = totals.annotators([(f.name, str(f.path)) for f in files])
    merged_df = pd.DataFrame(merged_rows, columns=ACTIONS_COLUMNS)
    return merged_df, clips_df, totals.actions(label_map), ann_df, totals.summary(len(files), rule, label_map)


def run(files: list, out: str | os.PathLike, *, label_map: str | os.PathLike, rule: str = "majority",
        report_dir: str | os.PathLike | None = None) -> dict:
    """Check every input, then write the merge and the three reports; returns the summary."""
    if len(files) < 2:
        raise ValueError(f"need at least two actions files to compare, got {len(files)}")
    paths = [Path(f) for f in files]
    real = [p.resolve() for p in paths]
    if len(set(real)) != len(real):
        raise ValueError("the same actions file is given twice")
    names = [annotator_name(p) for p in paths]
    if len(set(names)) != len(names):
        raise ValueError(f"two inputs have the same annotator name ({', '.join(names)}); rename one")
    out = Path(out)
    report_dir = Path(report_dir) if report_dir is not None else out.parent
    targets = [out] + [report_dir / f"agreement_{k}.tsv" for k in ("clips", "actions", "annotators")]
    for t in targets:
        if t.resolve() in real:
            raise ValueError(f"{t} is an input; write the merge to another file")
    lmap = read_label_map(label_map)
    labels = [read_labels(p, set(lmap["id"])) for p in paths]
    merged, clips, actions, annotators, summary = compare(labels, lmap, rule)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([ACTIONS_COLUMNS, *merged.itertuples(index=False)])
    write_text(out, buf.getvalue())
    for t, df in zip(targets[1:], (clips, actions, annotators)):
        write_tsv(t, df)
    summary.update(out=str(out), reports=[str(t) for t in targets[1:]])
    return summary
