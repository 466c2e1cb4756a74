"""The export's ``datasheet.md``, after Gebru et al., "Datasheets for Datasets" (2021).

Its seven sections (motivation, composition, collection process, preprocessing, uses,
distribution, maintenance) hold the facts the run knows (counts of sources, clips,
persons, actions, splits and licences; how the clips were made) and, for everything
else, the datasheet's questions as prompts for the dataset's authors to answer.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from microg4m.formats import provenance
from microg4m.common.atomic import write_text
from microg4m.formats.records import records_frame

PROMPT = "> _To be answered by the dataset's authors:_"


@dataclass
class Facts:
    """What the run knows about the exported dataset."""

    sources_listed: int = 0
    sources_downloaded: int = 0
    failed_by_class: dict[str, int] = field(default_factory=dict)
    sources_in_dataset: int = 0
    clips_listed: int = 0
    clips: int = 0
    clips_by_type: dict[str, int] = field(default_factory=dict)
    persons: int = 0
    label_rows: int | None = None  # None: no action labels yet
    actions_used: int = 0
    actions_in_map: int = 0
    action_counts: dict[str, int] = field(default_factory=dict)
    splits: dict[str, int] = field(default_factory=dict)
    licences: dict[str, int] = field(default_factory=dict)


def facts(*, provenance: pd.DataFrame | None, sources: pd.DataFrame, clips: pd.DataFrame,
          assignment: dict, persons: pd.DataFrame, ava: pd.DataFrame | None, label_map: pd.DataFrame) -> Facts:
    """Counts from the export's own tables (``sources``: the rows of sources.csv)."""
    f = Facts()
    if provenance is not None and len(provenance):
        f.sources_listed = len(provenance)
        f.sources_downloaded = int((provenance["status"] == "ok").sum())
        failed = provenance[provenance["status"] != "ok"]
        classes = failed["reason_class"] if "reason_class" in failed else pd.Series(["other"] * len(failed))
        f.failed_by_class = dict(sorted(Counter(c or "other" for c in classes).items()))
    f.sources_in_dataset = len(sources)
    f.clips_listed = len(clips)
    f.clips = len(assignment)
    kinds = clips.loc[clips["clip_id"].isin(list(assignment)), "clip_type"]
    f.clips_by_type = {"real footage (r)": int((kinds == "r").sum()), "film (m)": int((kinds == "m").sum())}
    f.persons = len(persons)
    f.actions_in_map = len(label_map)
    if ava is not None:
        f.label_rows = len(ava)
        names = dict(zip(label_map["id"], label_map["name"]))
        counts = Counter(ava["action_id"])
        f.actions_used = len(counts)
        f.action_counts = {f"{names.get(a, a)} ({a})": int(n) for a, n in sorted(counts.items())}
    f.splits = dict(Counter(assignment.values()))
    f.splits = {s: f.splits.get(s, 0) for s in ("train", "val", "test")}
    f.licences = dict(sorted(Counter((x or "not reported") for x in sources.get("license", [])).items()))
    return f


def _items(d: dict) -> str:
    return "\n".join(f"  - {k}: {v}" for k, v in d.items()) if d else "  - none"


# The datasheet's questions for the authors, per section (render's ``answers`` replace them).
QUESTIONS = {
    "motivation": (
        'For what purpose was the dataset created? Was there a specific task in mind, a\n'
        'gap to fill? Who created it (which team, on behalf of which entity)? Who funded it?'
    ),
    "composition": (
        'What do the instances represent (people, activities, settings)? Is it a sample\n'
        'of a larger set, and how was it chosen? Is any information missing, and why? Are there\n'
        'errors, noise or redundancies (near-duplicate clips)? Does it rely on external resources\n'
        '(the source videos) and can they change or vanish (see `microg4m verify`)? Does it hold\n'
        'data that might be confidential, offensive or that identifies people, directly or\n'
        'indirectly? Are subpopulations (age, gender ...) identifiable, and how are they\n'
        'distributed?'
    ),
    "collection": (
        'How were the source videos chosen, by whom, and over what time frame? Were the\n'
        'people in them told, and did they consent (and can they revoke it)? Was an ethical\n'
        "review conducted? Was the collection checked against the platforms' terms of service?"
    ),
    "preprocessing": (
        'Who labelled the actions, with what instructions and tools? How was agreement\n'
        'measured? Were boxes corrected by hand? Is the raw data kept?'
    ),
    "uses": (
        'What has the dataset been used for? What else could it be used for? Is there\n'
        'anything about its composition or collection that could affect future uses (harms,\n'
        'stereotypes)? Are there tasks it should not be used for?'
    ),
    "distribution": (
        'How will it be distributed (clip ids and `redownload.tsv` only, or the media)?\n'
        "Under which licence and terms? Do the sources' licences (above, and per source in\n"
        '`sources.csv`) allow it? Are there export controls or other restrictions?'
    ),
    "maintenance": (
        'Who maintains it and how can they be reached? Will it be updated (errata,\n'
        'sources that vanish: `microg4m verify` lists them), how often, by whom? Will older\n'
        'versions stay available? How can others contribute?'
    ),
}


def render(f: Facts, answers: dict[str, str] | None = None) -> str:
    """The datasheet as Markdown; ``answers`` (section -> text, the keys of QUESTIONS): the
    authors' answers, in place of the questions."""
    answers = answers or {}
    unknown = sorted(set(answers) - set(QUESTIONS))
    if unknown:
        raise ValueError(f"datasheet answers for unknown section(s) {', '.join(unknown)} "
                         f"(known: {', '.join(QUESTIONS)})")
    ask = {k: answers[k].strip() if answers.get(k) else f"{PROMPT} {q}" for k, q in QUESTIONS.items()}
    labels = ("no action labels yet (only the annotation template)" if f.label_rows is None else
              f"{f.label_rows} label rows, {f.actions_used} of the label map's {f.actions_in_map} actions used")
    return f"""# Datasheet

After Gebru et al., "Datasheets for Datasets" (Communications of the ACM 64(12), 2021).
The counts were filled in by microg4m from this export; the prompts are for the dataset's
authors. Files: `sources.csv` (where each source came from), `redownload.tsv` (a sources
table that fetches the same files again; check it with `microg4m verify`).

## Motivation

{ask["motivation"]}

## Composition

- Instances: 3-second clips (90 frames at 30 fps) of the source videos, with one box per
  tracked person at a keyframe, in AVA format.
- Sources: {f.sources_in_dataset} in the dataset, of {f.sources_listed} in the sources table;
  {f.sources_downloaded} downloaded, {sum(f.failed_by_class.values())} failed (by reason class; see
  `ledger.tsv` and docs/downloading.md):
{_items(f.failed_by_class)}
- Clips: {f.clips} in the dataset, of {f.clips_listed} cut from the sources:
{_items(f.clips_by_type)}
- Persons (boxes at keyframes): {f.persons}.
- Actions: {labels}:
{_items(f.action_counts)}
- Splits (clips):
{_items(f.splits)}
- Licences of the sources in the dataset (as yt-dlp reports them; `sources.csv` per source):
{_items(f.licences)}

{ask["composition"]}

## Collection process

- Downloaded with yt-dlp (version and format per source in `sources.csv`), at 480p
  or the best below it; films are local files. Each source's file is recorded with
  its sha256.

{ask["collection"]}

## Preprocessing, cleaning, labelling

- Cut into exact 3 s / 30 fps clips (ffmpeg); persons detected with YOLO; clips with a
  scene cut or too few person frames rejected (PySceneDetect); persons tracked with
  BoT-SORT, one keyframe box per person; boxes normalised to [0, 1]. Every rejected
  source and clip, with its reason, is in the run's `ledger.tsv`.
- Action labels: from the actions file (validated; problems in `label_report.tsv`).

{ask["preprocessing"]}

## Uses

{ask["uses"]}

## Distribution

{ask["distribution"]}

## Maintenance

{ask["maintenance"]}
"""


def write(path: str | os.PathLike, f: Facts) -> None:
    write_text(path, render(f))


def write_export(out_dir: str | os.PathLike, *, downloads, clips: pd.DataFrame, assignment: dict,
                 persons: pd.DataFrame, ava: pd.DataFrame | None, label_map: pd.DataFrame) -> dict:
    """The export's traceability files: ``sources.csv`` and ``redownload.tsv`` from the
    download records, and ``datasheet.md`` (export.run calls it last)."""
    records = records_frame(downloads)
    per_source = clips.loc[sorted(assignment), "source_id"].value_counts().to_dict()
    rows = provenance.write_export_files(out_dir, records, per_source)
    f = facts(provenance=records, sources=rows, clips=clips, assignment=assignment, persons=persons, ava=ava,
              label_map=label_map)
    write(Path(out_dir) / "datasheet.md", f)
    return {"sources": len(rows), "licences": f.licences}
