"""Export of the reviewed captions and QA pairs: ``vqa_and_captioning.json`` and statistics.

Only clips that a person marked reviewed on the annotation page are exported, and only
those the filter kept. The JSON is the released schema, written as the released file is
(a list of ``{video_id, caption, qa_pairs: [{Q, A}]}`` sorted by clip id, two-space
indent, UTF-8 with non-ASCII characters as they are, no final newline), so the released sample
re-written by :func:`dumps` is byte-identical. Entries that cannot be used (broken rules,
a clip that is not kept) are listed in ``vqa_report.tsv`` with the reason.

Statistics (``statistics/``, CSV):

* ``vqa_overall.csv``: ``statistic,value``: clips, captions, QA pairs, unanswerable
  pairs, pairs per clip (mean), words per caption (mean, median, min, max), questions
  with a warning (sound / intent / not visible);
* ``vqa_qa_per_clip.csv``: ``qa_pairs,clips,ratio(%)`` for 0..6 pairs;
* ``vqa_caption_words.csv``: ``words,clips,ratio(%)`` in bins of 10 words;
* ``vqa_question_types.csv``: ``question_type,count,ratio(%)`` (the Wh-form of each
  question, :func:`microg4m.vqa.rules.question_type`);
* ``vqa_word_frequency.csv``: ``word,count``, the 50 commonest caption words without
  stop words (the data behind the paper's word clouds);
* ``vqa_statistics.png``: the four distributions as bar charts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from microg4m.common.atomic import atomic_path, write_csv, write_text  # noqa: E402
from microg4m.formats.clips import Report, load_clips  # noqa: E402
from microg4m.vqa.rules import MAX_PAIRS, QUESTION_TYPES, UNANSWERABLE, VQAError, check_caption, check_entry, check_pairs, question_type, read_reviews, warnings_for, word_counts, words

TOP_WORDS = 50


def dumps(records: list[dict]) -> str:
    """The released file's layout (see the module docstring)."""
    return json.dumps([{"video_id": r["video_id"], "caption": r["caption"],
                        "qa_pairs": [{"Q": p["Q"], "A": p["A"]} for p in r["qa_pairs"]]} for r in records],
                      indent=2, ensure_ascii=False)


def load(path: str | os.PathLike) -> list[dict]:
    """The records of a ``vqa_and_captioning.json`` (the released schema), each checked by the
    review rules; ValueError naming the file and the record otherwise."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(doc, list):
        raise ValueError(f"{path}: expected a list of {{video_id, caption, qa_pairs}}")
    out = []
    for i, r in enumerate(doc, 1):
        try:
            if not isinstance(r, dict) or not isinstance(r.get("video_id"), str):
                raise VQAError("no video_id")
            out.append({"video_id": r["video_id"], "caption": check_caption(r.get("caption")),
                        "qa_pairs": check_pairs(r.get("qa_pairs"))})
        except VQAError as exc:
            raise ValueError(f"{path}: record {i}: {exc}") from None
    return out


def _ratio(counts: pd.Series) -> pd.Series:
    total = counts.sum()
    return (counts / total * 100).round(2) if total else counts.astype(float)


def statistics(records: list[dict]) -> dict[str, pd.DataFrame]:
    """The statistics tables of a list of released-schema records."""
    n_words = [len(words(r["caption"])) for r in records]
    pairs = [p for r in records for p in r["qa_pairs"]]
    n_pairs = [len(r["qa_pairs"]) for r in records]
    wq = sum(bool(warnings_for(p["Q"])) for p in pairs)

    def stat(fn, values):
        return round(float(fn(values)), 2) if values else 0

    overall = pd.DataFrame([
        ("clips", len(records)),
        ("captions", sum(bool(r["caption"]) for r in records)),
        ("qa pairs", len(pairs)),
        ("unanswerable pairs", sum(p["A"] == UNANSWERABLE for p in pairs)),
        ("qa pairs per clip (mean)", stat(np.mean, n_pairs)),
        ("words per caption (mean)", stat(np.mean, n_words)),
        ("words per caption (median)", stat(np.median, n_words)),
        ("words per caption (min)", stat(np.min, n_words)),
        ("words per caption (max)", stat(np.max, n_words)),
        ("questions with a warning", wq),
    ], columns=["statistic", "value"])

    per_clip = pd.Series(n_pairs, dtype=int).value_counts().reindex(range(MAX_PAIRS + 1), fill_value=0)
    per_clip = pd.DataFrame({"qa_pairs": per_clip.index, "clips": per_clip.to_numpy()})
    per_clip["ratio(%)"] = _ratio(per_clip["clips"])

    top = (max(n_words) // 10 + 1) * 10 if n_words else 10
    bins = pd.Series([w // 10 for w in n_words], dtype=int).value_counts().reindex(range(top // 10), fill_value=0)
    cap_words = pd.DataFrame({"words": [f"{10 * b}-{10 * b + 9}" for b in bins.index], "clips": bins.to_numpy()})
    cap_words["ratio(%)"] = _ratio(cap_words["clips"])

    qt = pd.Series([question_type(p["Q"]) for p in pairs], dtype=object).value_counts()
    qt = qt.reindex(QUESTION_TYPES, fill_value=0)
    qtypes = pd.DataFrame({"question_type": qt.index, "count": qt.to_numpy()})
    qtypes = qtypes.sort_values("count", ascending=False, kind="stable").reset_index(drop=True)
    qtypes["ratio(%)"] = _ratio(qtypes["count"])

    freq = sorted(word_counts(r["caption"] for r in records).items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_WORDS]
    wf = pd.DataFrame(freq, columns=["word", "count"])
    return {"overall": overall, "qa_per_clip": per_clip, "caption_words": cap_words, "question_types": qtypes,
            "word_frequency": wf}


def _plot(path: Path, tables: dict[str, pd.DataFrame]) -> None:
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    specs = [("qa_per_clip", "qa_pairs", "clips", "QA pairs per clip", "tab:blue"),
             ("caption_words", "words", "clips", "Words per caption", "tab:green"),
             ("question_types", "question_type", "count", "Question types", "tab:orange"),
             ("word_frequency", "word", "count", f"Commonest caption words (top {TOP_WORDS // 2})", "tab:purple")]
    for ax, (name, x, y, title, color) in zip(axes.flat, specs):
        df = tables[name].head(TOP_WORDS // 2) if name == "word_frequency" else tables[name]
        if len(df) and df[y].sum():
            ax.bar(np.arange(len(df)), df[y], color=color)
            ax.set_xticks(np.arange(len(df)), [str(v) for v in df[x]], rotation=60 if len(df) > 8 else 0,
                          ha="right" if len(df) > 8 else "center", fontsize=8)
        else:
            ax.text(0.5, 0.5, "no reviewed clips yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        ax.set_ylabel(y)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)


def collect(clips: pd.DataFrame, entries: dict, source: str, report: Report) -> tuple[list[dict], int]:
    """``(records of the reviewed kept clips, number of entries not yet reviewed)``."""
    records, unreviewed = [], 0
    for cid in sorted(entries):
        try:
            e = check_entry(entries[cid])
        except VQAError as exc:
            report.add(source, cid, f"{exc}; left out")
            continue
        if not e["reviewed"]:
            unreviewed += 1
            continue
        if cid not in clips.index:
            report.add(source, cid, "not a clip of this run; left out")
            continue
        if not clips.at[cid, "kept"]:
            report.add(source, cid, f"clip not kept ({clips.at[cid, 'why']}); left out")
            continue
        records.append({"video_id": cid, "caption": e["caption"], "qa_pairs": e["qa_pairs"]})
    return records, unreviewed


def run(*, manifests, decisions, reviews, out_dir: str | os.PathLike) -> dict:
    """Write the JSON, ``vqa_report.tsv`` and ``statistics/`` into ``out_dir``; return a summary."""
    out = Path(out_dir)
    report = Report()
    clips = load_clips(manifests, decisions, report)
    entries = {}
    if reviews is not None:
        try:
            entries = read_reviews(reviews)
        except VQAError as exc:
            report.add(reviews, "", str(exc))
    records, unreviewed = collect(clips, entries, str(reviews), report)
    write_text(out / "vqa_and_captioning.json", dumps(records))
    tables = statistics(records)
    stats_dir = out / "statistics"
    for name, df in tables.items():
        write_csv(stats_dir / f"vqa_{name}.csv", df)
    _plot(stats_dir / "vqa_statistics.png", tables)
    report.write(out / "vqa_report.tsv")
    return {"exported": len(records), "unreviewed": unreviewed, "problems": len(report.rows),
            "qa_pairs": int(sum(len(r["qa_pairs"]) for r in records))}
