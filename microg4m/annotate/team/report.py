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
from pathlib import Path

import pandas as pd

from microg4m.common.atomic import write_text, write_tsv
from microg4m.formats.labels import ACTIONS_COLUMNS
from ..agreement import Labels, compare
from ..suggestions import tally
from .db import FINAL
from .decisions import Snapshot, decision, status


def _clean(records: list[dict]) -> list[dict]:
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in records]


def figures(snap: Snapshot, assigned: dict[str, list[str]], persons_of, annotators: list[str],
            label_map: pd.DataFrame, report_dir: Path | None = None, outcomes: dict | None = None) -> dict:
    """Everything the page shows and the report writes (pure; ``persons_of(clip)``;
    ``outcomes``: (annotator, clip, person) -> the suggestion's outcome, history.outcomes)."""
    outcomes = {k: o for k, o in (outcomes or {}).items() if k[0] in annotators}
    persons = {c: persons_of(c) for c in assigned}
    done = {a: {} for a in annotators}  # annotator -> clip -> decision
    for clip, names in assigned.items():
        for a in names:
            d = decision(snap, a, clip, persons[clip]) if a in done else None
            if d is not None:
                done[a][clip] = d
    files = []
    for a in annotators:
        path = (report_dir or Path(".")) / f"actions.{a}.csv"
        lab = Labels(path, a)
        for clip, d in sorted(done[a].items()):
            if d[0] == "labels":
                lab.clip_type[clip] = snap.clip_type.get(clip, "")
                for p in persons[clip]:
                    lab.persons[(clip, p)] = list(snap.layer_actions(a)[(clip, p)])
        files.append(lab)
    _, clips_df, actions_df, ann_df, summary = compare(files, label_map)

    extra = []
    final_acts = snap.layer_actions(FINAL)
    final_excl = snap.layer_excluded(FINAL)
    for a in annotators:
        differs = changed = 0
        for clip, d in done[a].items():
            others = [done[b][clip] for b in assigned[clip] if b != a and b in done and clip in done[b]]
            differs += any((o[0] == "excluded") != (d[0] == "excluded") for o in others)
            has_final = clip in final_excl or any(c == clip for c, _ in final_acts)
            if has_final:
                if (clip in final_excl) != (d[0] == "excluded"):
                    changed += 1
                elif d[0] == "labels":
                    own = {(p, x) for p, s in d[1] for x in s}
                    fin = {(p, x) for (c, p), acts in final_acts.items() if c == clip for x in acts}
                    changed += len(own ^ fin)
        extra.append({"annotator": a, "done": len(done[a]),
                      "excluded": sum(d[0] == "excluded" for d in done[a].values()),
                      "exclusion_differs": differs, "changed_by_final": changed,
                      **tally(o for k, o in outcomes.items() if k[0] == a)})
    ann = ann_df.merge(pd.DataFrame(extra, columns=["annotator", "done", "excluded", "exclusion_differs",
                                                    "changed_by_final", *tally([])]), on="annotator", how="right")
    ann = ann.fillna({"clips": 0, "labels": 0, "differing": 0, "corrected": 0}).astype(
        {"clips": int, "labels": int, "differing": int, "corrected": int})
    counts = {s: 0 for s in ("pending", "agreed", "disagree", "resolved")}
    adjudication = []
    for clip in sorted(assigned):
        st = status(snap, clip, persons[clip], assigned[clip])
        counts[st] += 1
        adjudication.append({"clip_id": clip, "status": st, "annotators": ",".join(assigned[clip]),
                             "final_by": snap.resolved.get(clip, ""), "note": snap.notes.get(clip, "")})
    summary.update(clips_assigned=len(assigned), **{f"clips_{k}": v for k, v in counts.items()},
                   **tally(outcomes.values()))
    return {"summary": summary, "files": files, "clips": clips_df, "actions": actions_df, "annotators": ann,
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
