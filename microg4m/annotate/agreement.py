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


def compare(files: list[Labels], label_map: pd.DataFrame, rule: str = "majority"):
    """Measures and merge (pure). Returns (merged rows, clips, actions, annotators, summary)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    clip_type: dict[str, str] = {}
    for f in files:
        for clip, t in f.clip_type.items():
            if clip_type.setdefault(clip, t) != t:
                raise ValueError(f"{clip} is {t!r} in {f.path} but {clip_type[clip]!r} in another file")
    merged_rows, clip_rows = [], []
    merged: dict[tuple[str, int], list[int]] = {}
    differing_of = {f.name: 0 for f in files}
    for clip in sorted(clip_type):
        who = [f for f in files if clip in f.clip_type]
        m = len(who)
        persons = sorted({p for f in who for (c, p) in f.persons if c == clip})
        need = {"union": 1, "majority": m // 2 + 1, "all": m}[rule]
        exact = union = agreed = kept_total = dropped = 0
        for p in persons:
            sets = [f.persons.get((clip, p), []) for f in who]
            order = list(dict.fromkeys(a for s in sets for a in s))
            votes = {a: sum(a in s for s in sets) for a in order}
            exact += all(set(s) == set(sets[0]) for s in sets)
            union += len(order)
            agreed += sum(v == m for v in votes.values())
            keep = [a for a in order if votes[a] >= need]
            if len(keep) > MAX_ACTIONS:
                ranked = sorted(keep, key=lambda a: (-votes[a], order.index(a)))[:MAX_ACTIONS]
                dropped += len(keep) - MAX_ACTIONS
                keep = [a for a in keep if a in ranked]
            kept_total += len(keep)
            merged[(clip, p)] = keep
            merged_rows += [(clip, clip_type[clip], p, a) for a in keep]
        for f in who:
            differing_of[f.name] += union - agreed if m > 1 else 0
        clip_rows.append({
            "clip_id": clip, "annotators": m, "persons": len(persons), "exact_persons": exact,
            "exact_share": round(exact / len(persons), 4) if persons and m > 1 else None,
            "labels_union": union, "labels_agreed": agreed, "differing": union - agreed,
            "merged": kept_total, "dropped_over_limit": dropped,
        })

    # per action: pooled 2×2 tables over every pair of files and the persons of their shared clips
    tables = {int(a): [0, 0, 0, 0] for a in label_map["id"]}
    for fa, fb in combinations(files, 2):
        shared = fa.clips() & fb.clips()
        items = {k for k in (*fa.persons, *fb.persons) if k[0] in shared}
        for k in items:
            sa, sb = set(fa.persons.get(k, [])), set(fb.persons.get(k, []))
            for a, t in tables.items():
                t[0 if a in sa and a in sb else 1 if a in sa else 2 if a in sb else 3] += 1
    action_rows = []
    for r in label_map.itertuples(index=False):
        a, b, c, d = tables[int(r.id)]
        chosen = sum(int(r.id) in acts for f in files for acts in f.persons.values())
        kappa = _kappa(a, b, c, d)
        action_rows.append({
            "action_id": int(r.id), "name": r.name, "label_type": r.label_type, "chosen": chosen,
            "both": a, "one_only": b + c,
            "positive_agreement": round(2 * a / (2 * a + b + c), 4) if a + b + c else None,
            "kappa": round(kappa, 4) if kappa is not None else None,
        })

    ann_rows = []
    for f in files:
        own = {(c, p, a) for (c, p), acts in f.persons.items() for a in acts}
        mine = {(c, p, a) for (c, p), acts in merged.items() if c in f.clip_type for a in acts}
        ann_rows.append({"annotator": f.name, "file": str(f.path), "clips": len(f.clip_type), "labels": len(own),
                         "differing": differing_of[f.name], "corrected": len(own ^ mine)})

    clips_df = pd.DataFrame(clip_rows, columns=[
        "clip_id", "annotators", "persons", "exact_persons", "exact_share", "labels_union", "labels_agreed",
        "differing", "merged", "dropped_over_limit"])
    actions_df = pd.DataFrame(action_rows, columns=[
        "action_id", "name", "label_type", "chosen", "both", "one_only", "positive_agreement", "kappa"])
    ann_df = pd.DataFrame(ann_rows, columns=["annotator", "file", "clips", "labels", "differing", "corrected"])
    shared = clips_df[clips_df["annotators"] > 1]
    tot = [sum(t[i] for t in tables.values()) for i in range(3)]
    summary = {
        "files": len(files), "rule": rule, "clips": len(clips_df), "clips_shared": len(shared),
        "persons_shared": int(shared["persons"].sum()),
        "exact_share": round(int(shared["exact_persons"].sum()) / int(shared["persons"].sum()), 4)
        if int(shared["persons"].sum()) else None,
        "differing": int(shared["differing"].sum()),
        "positive_agreement": round(2 * tot[0] / (2 * tot[0] + tot[1] + tot[2]), 4) if sum(tot) else None,
        "merged_rows": len(merged_rows),
    }
    merged_df = pd.DataFrame(merged_rows, columns=ACTIONS_COLUMNS)
    return merged_df, clips_df, actions_df, ann_df, summary


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
