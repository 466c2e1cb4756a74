"""Agreement on captions and QA pairs: word-level diffs, pair matching, and the figures.

Words are the white-space separated tokens of a text; diffs and edit distances are over
words (rapidfuzz's Levenshtein: insert, delete or replace one word costs 1).

Pairs of a version are matched to those of a base (the draft, another version, the
final): an identical pair is *kept*; else a pair with the same question (case aside), or
the most similar question (word-level normalised similarity >= 0.5, best first), is
*edited*; the base's pairs left over are *dropped*, the version's are *added*. Shares are
over all four counts, so they add up to 1.

Figures, over the *reviewed* versions of the assigned clips (as the action figures are
over the clips an annotator is done with):

* per clip and reviewer (``text_agreement_versions.tsv``): the caption's edit distance
  from the draft, pairs kept / edited / dropped / added against the draft and their
  shares, whether the final text differs from the version (``changed_by_final``) and
  the edit distance from the version to the final caption;
* per clip (``text_agreement_clips.tsv``): status, reviewers, the mean caption edit
  distance between the reviewers' versions, who set the final, which versions it changed,
  the note;
* per reviewer (``text_agreement_reviewers.tsv``): versions reviewed, mean caption edit
  distance from the draft, the pair counts and shares, clips with a final, how many of
  those the adjudicator changed and the share;
* question types (``text_question_types.tsv``): the Wh-form of each question
  (microg4m.vqa.rules.question_type) in the drafts, each reviewer's versions and the finals;
* ``text_summary.json``: clips per status and the overall shares.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pandas as pd
from rapidfuzz.distance import Levenshtein

from microg4m.common.atomic import write_text, write_tsv
from microg4m.vqa.rules import QUESTION_TYPES, question_type
from .vqa_review import STATUSES, ClipTexts, same, status

SIMILAR = 0.5
PAIR_STATES = ("kept", "edited", "dropped", "added")


def tokens(text: str) -> list[str]:
    return text.split()


def word_distance(a: str, b: str) -> int:
    return Levenshtein.distance(tokens(a), tokens(b))


def word_diff(a: str, b: str) -> list[list[str]]:
    """From ``a`` to ``b``: ``[[op, text], ...]`` with op ``=`` (same), ``-`` (only in a),
    ``+`` (only in b); a replacement is its ``-`` then its ``+``."""
    wa, wb = tokens(a), tokens(b)
    out: list[list[str]] = []
    for op in Levenshtein.opcodes(wa, wb):
        if op.tag == "equal":
            out.append(["=", " ".join(wa[op.src_start:op.src_end])])
            continue
        if op.src_end > op.src_start:
            out.append(["-", " ".join(wa[op.src_start:op.src_end])])
        if op.dest_end > op.dest_start:
            out.append(["+", " ".join(wb[op.dest_start:op.dest_end])])
    merged: list[list[str]] = []  # neighbours with the same op (replace, replace) become one
    for op, text in out:
        if merged and merged[-1][0] == op:
            merged[-1][1] += " " + text
        else:
            merged.append([op, text])
    return merged


def match_pairs(base: list[dict], pairs: list[dict]) -> tuple[list[tuple[int, int | None, str]], list[int]]:
    """``([(version index, base index or None, state)], dropped base indices)``."""
    left = set(range(len(base)))
    match: dict[int, tuple[int, str]] = {}
    for i, p in enumerate(pairs):  # identical pairs
        j = next((j for j in sorted(left) if base[j]["Q"] == p["Q"] and base[j]["A"] == p["A"]), None)
        if j is not None:
            match[i] = (j, "kept")
            left.discard(j)
    for i, p in enumerate(pairs):  # the same question
        if i in match:
            continue
        j = next((j for j in sorted(left) if base[j]["Q"].lower() == p["Q"].lower()), None)
        if j is not None:
            match[i] = (j, "edited")
            left.discard(j)
    scored = sorted(((Levenshtein.normalized_similarity(tokens(p["Q"].lower()), tokens(base[j]["Q"].lower())), i, j)
                     for i, p in enumerate(pairs) if i not in match for j in left), key=lambda t: (-t[0], t[1], t[2]))
    for score, i, j in scored:  # the most similar questions, best first
        if score >= SIMILAR and i not in match and j in left:
            match[i] = (j, "edited")
            left.discard(j)
    rows = [(i, *match[i]) if i in match else (i, None, "added") for i in range(len(pairs))]
    return rows, sorted(left)


def pair_counts(base: list[dict], pairs: list[dict]) -> dict[str, int]:
    rows, dropped = match_pairs(base, pairs)
    counts = {s: sum(r[2] == s for r in rows) for s in ("kept", "edited", "added")}
    counts["dropped"] = len(dropped)
    return {s: counts[s] for s in PAIR_STATES}


def shares(counts: dict[str, int]) -> dict[str, float | None]:
    total = sum(counts.values())
    return {f"share_{s}": round(counts[s] / total, 4) if total else None for s in PAIR_STATES}


def text_diff(base: dict, version: dict) -> dict:
    """What the page shows of a version against a base: the caption's word diff and, per
    pair, its state with word diffs of Q and A (dropped pairs last)."""
    rows, dropped = match_pairs(base["qa_pairs"], version["qa_pairs"])
    pairs = []
    for i, j, state in rows:
        p, b = version["qa_pairs"][i], base["qa_pairs"][j] if j is not None else {"Q": "", "A": ""}
        pairs.append({"state": state, "Q": word_diff(b["Q"], p["Q"]), "A": word_diff(b["A"], p["A"])})
    for j in dropped:
        b = base["qa_pairs"][j]
        pairs.append({"state": "dropped", "Q": [["-", b["Q"]]], "A": [["-", b["A"]]]})
    return {"caption": word_diff(base["caption"], version["caption"]), "pairs": pairs,
            "caption_edit_words": word_distance(base["caption"], version["caption"]),
            "counts": pair_counts(base["qa_pairs"], version["qa_pairs"])}


# ---------------------------------------------------------------- the figures


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 2) if values else None


@dataclass
class TextPart:
    """What one assigned clip adds to the text figures (:func:`clip_part`); the figures are
    made from the parts of every clip (:func:`from_parts`), so a page can keep the parts and
    make again only those of the clips that changed (the word diffs are the costly part)."""

    clip_id: str
    names: list[str]
    status: str
    final_by: str
    versions: list[dict]  # the text_agreement_versions rows of its reviewed versions
    row: dict  # its text_agreement_clips row
    qtypes: dict[str, dict[str, int]]  # draft / a reviewer / final -> question type -> pairs


def clip_part(clip: str, ct: ClipTexts, names: list[str], d: dict | None, reviewers: list[str]) -> TextPart:
    """The part of one clip (pure); ``d``: its draft record (an ok draft is the starting text)."""
    st = status(ct, names)
    qtypes: dict[str, dict[str, int]] = {}

    def count(who: str, pairs: list[dict]) -> None:
        for p in pairs:
            kinds = qtypes.setdefault(who, {})
            t = question_type(p["Q"])
            kinds[t] = kinds.get(t, 0) + 1

    draft = {"caption": d.get("caption") or "", "qa_pairs": d.get("qa_pairs") or []} \
        if d and d.get("status") == "ok" else None
    if draft is not None:
        count("draft", draft["qa_pairs"])
    done = {r: ct.versions[r] for r in names if r in ct.versions and ct.versions[r].get("reviewed")}
    changed, rows = [], []
    for r, v in done.items():
        row = {"clip_id": clip, "reviewer": r, "status": st, "has_draft": draft is not None,
               "caption_words": len(tokens(v["caption"])), "pairs": len(v["qa_pairs"])}
        base = draft if draft is not None else {"caption": "", "qa_pairs": []}
        c = pair_counts(base["qa_pairs"], v["qa_pairs"])
        row["caption_edit_words"] = word_distance(base["caption"], v["caption"]) if draft is not None else None
        row.update({f"pairs_{s}": c[s] for s in PAIR_STATES}, **shares(c))
        row["final_set"] = ct.final is not None
        row["changed_by_final"] = None if ct.final is None else not same(v, ct.final)
        row["to_final_edit_words"] = None if ct.final is None else word_distance(v["caption"], ct.final["caption"])
        if row["changed_by_final"]:
            changed.append(r)
        if r in reviewers:
            count(r, v["qa_pairs"])
        rows.append(row)
    between = [word_distance(done[a]["caption"], done[b]["caption"]) for a, b in combinations(sorted(done), 2)]
    if ct.final is not None:
        count("final", ct.final["qa_pairs"])
    final_by = ct.final["by"] if ct.final else ""
    row = {"clip_id": clip, "status": st, "reviewers": ",".join(names), "reviewed": len(done),
           "between_edit_words": _mean(between), "final_by": final_by, "changed_by_final": ",".join(changed),
           "note": ct.note}
    return TextPart(clip, list(names), st, final_by, rows, row, qtypes)


VERSION_COLUMNS = ["clip_id", "reviewer", "status", "has_draft", "caption_words", "pairs", "caption_edit_words",
                   *(f"pairs_{s}" for s in PAIR_STATES), *(f"share_{s}" for s in PAIR_STATES), "final_set",
                   "changed_by_final", "to_final_edit_words"]
CLIP_COLUMNS = ["clip_id", "status", "reviewers", "reviewed", "between_edit_words", "final_by", "changed_by_final",
                "note"]


def from_parts(parts: list[TextPart], reviewers: list[str], clip_rows: bool = True) -> dict:
    """The figures of the clips whose parts are given (in clip order); ``clip_rows``: also
    the per-clip table (the report's; the page does not show it)."""
    qtypes = {name: {t: 0 for t in QUESTION_TYPES} for name in ["draft", *reviewers, "final"]}
    counts = {s: 0 for s in STATUSES}
    version_rows = []
    for part in parts:
        counts[part.status] += 1
        version_rows += part.versions
        for who, kinds in part.qtypes.items():
            for t, n in kinds.items():
                qtypes[who][t] += n
    versions = pd.DataFrame(version_rows, columns=VERSION_COLUMNS)
    rev_rows = []
    for r in reviewers:
        mine = versions[versions["reviewer"] == r]
        c = {s: int(mine[f"pairs_{s}"].sum()) for s in PAIR_STATES}
        finals = mine[mine["final_set"] == True]  # noqa: E712 (a column of bools)
        changed = int(finals["changed_by_final"].sum()) if len(finals) else 0
        rev_rows.append({"reviewer": r, "reviewed": len(mine),
                         "mean_caption_edit_words": _mean(mine["caption_edit_words"].dropna().tolist()),
                         **{f"pairs_{s}": c[s] for s in PAIR_STATES}, **shares(c), "with_final": len(finals),
                         "changed_by_final": changed,
                         "changed_share": round(changed / len(finals), 4) if len(finals) else None})
    rcols = ["reviewer", "reviewed", "mean_caption_edit_words", *(f"pairs_{s}" for s in PAIR_STATES),
             *(f"share_{s}" for s in PAIR_STATES), "with_final", "changed_by_final", "changed_share"]
    total = {s: int(versions[f"pairs_{s}"].sum()) for s in PAIR_STATES}
    finals = versions[versions["final_set"] == True]  # noqa: E712
    adjudicated = [p.row for p in parts if p.final_by and p.final_by != "@auto"]
    summary = {"clips_assigned": len(parts), **{f"clips_{k}": v for k, v in counts.items()},
               "versions_reviewed": len(versions),
               "mean_caption_edit_words": _mean(versions["caption_edit_words"].dropna().tolist()),
               **{f"pairs_{s}": total[s] for s in PAIR_STATES}, **shares(total),
               "versions_changed_by_final": int(finals["changed_by_final"].sum()) if len(finals) else 0,
               "versions_with_final": len(finals),
               "clips_adjudicated": len(adjudicated),
               "clips_adjudicator_changed_every_version": sum(
                   bool(r["changed_by_final"]) and len(r["changed_by_final"].split(",")) == r["reviewed"]
                   for r in adjudicated)}
    qt = pd.DataFrame([{"question_type": t, **{n: qtypes[n][t] for n in qtypes}} for t in QUESTION_TYPES])
    out = {"summary": summary, "versions": versions, "reviewers": pd.DataFrame(rev_rows, columns=rcols),
           "question_types": qt}
    if clip_rows:
        out["clips"] = pd.DataFrame([p.row for p in parts], columns=CLIP_COLUMNS)
    return out


def figures(texts: dict[str, ClipTexts], assigned: dict[str, list[str]], drafts: dict[str, dict],
            reviewers: list[str]) -> dict:
    """Everything the page shows and the report writes (pure). ``drafts``: clip -> draft
    record (ok drafts count as the starting text)."""
    empty = ClipTexts()
    return from_parts([clip_part(c, texts.get(c, empty), assigned[c], drafts.get(c), reviewers)
                       for c in sorted(assigned)], reviewers)


def _clean(records: list[dict]) -> list[dict]:
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in records]


def as_json(fig: dict) -> dict:
    return {"summary": fig["summary"], "reviewers": _clean(fig["reviewers"].to_dict("records")),
            "question_types": fig["question_types"].to_dict("records")}


def write(fig: dict, report_dir: str | Path) -> list[str]:
    """Write the text agreement files (atomically); returns their paths."""
    out = Path(report_dir)
    written = []
    for name in ("versions", "clips", "reviewers"):
        path = out / f"text_agreement_{name}.tsv"
        write_tsv(path, fig[name])
        written.append(path)
    path = out / "text_question_types.tsv"
    write_tsv(path, fig["question_types"])
    written.append(path)
    path = out / "text_summary.json"
    write_text(path, json.dumps(fig["summary"], indent=2) + "\n")
    return [str(p) for p in written + [path]]
