"""The release's ``README.md``: a Hugging Face dataset card. YAML front matter (licence,
task categories, size category, tags, a ``configs`` entry per table so that
``datasets.load_dataset(REPO, CONFIG)`` reads it), then the release's contents, how to
load it, its files and tables, videos and licences, splits, the datasheet's sections with
the authors' answers, the Croissant RAI fields, the changes and the citation. What only
the authors can write carries :data:`~microg4m.release.metadata.AUTHORS`.
"""

from __future__ import annotations

import yaml

from microg4m.formats.splits import SPLITS
from microg4m.release.metadata import AUTHORS
from microg4m.release.tables import ALL, TABLES

TASKS = {"actions": "video-classification", "tracks": "object-detection", "captions": "video-text-to-text",
         "vqa": "visual-question-answering"}


def size_category(n: int) -> str:
    for bound, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if n < bound:
            return name
    return "n>10M"


def configs(present: dict[str, list[str]]) -> list[dict]:
    """The card's ``configs``: one per table written, its files by split (actions first: the default)."""
    out = []
    for name, files in present.items():
        t = TABLES[name]
        if t.per_split:
            data = [{"split": f.rsplit("/", 1)[1].removesuffix(".parquet"), "path": f} for f in files]
        else:
            data = [{"split": ALL, "path": files[0]}]
        entry = {"config_name": name, "data_files": data}
        if name == next(iter(present)):
            entry["default"] = True
        out.append(entry)
    return out


def front_matter(*, meta: dict, licence: str, present: dict[str, list[str]], clips: int, keywords: list[str]) -> str:
    doc = {
        "pretty_name": meta.get("name") or "microg4m dataset",
        "license": licence,
        "language": ["en"],
        "task_categories": sorted({TASKS[t] for t in present if t in TASKS}),
        "size_categories": [size_category(clips)],
        "tags": keywords,
        "configs": configs(present),
    }
    return "---\n" + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120) + "---\n"


def _table(rows: list[list], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _datasheet(markdown: str) -> str:
    """The datasheet's sections, one heading level down, its file names those of the release."""
    body = markdown[markdown.index("## Motivation"):]
    body = body.replace("`sources.csv`", "`data/sources.parquet`").replace("this export", "this release")
    return "\n".join(("#" + line) if line.startswith("## ") else line for line in body.splitlines())


def render(*, meta: dict, licence: str, version: str, date: str, present: dict[str, list[str]],
           counts: dict, sources: list[list], datasheet_md: str, rai: dict, changes_line: str,
           shards: list[str], videos: int, blur: bool, keywords: list[str]) -> str:
    name = meta.get("name") or "microg4m dataset"
    description = meta.get("description") or f"{AUTHORS} What the dataset is, in a paragraph."
    per_split = counts["per_split"]
    lines = [front_matter(meta=meta, licence=licence, present=present, clips=counts["clips"], keywords=keywords),
             f"# {name}", "", description, "",
             f"Release **{version}** ({date}), made with microg4m from its export. "
             f"{changes_line}", "",
             "## Contents", "",
             _table([[k, sum(n.values()), *((n.get(s, 0) for s in SPLITS) if ALL not in n else [""] * len(SPLITS))]
                     for k, n in per_split.items()], ["rows", "all", *SPLITS]), "",
             f"Sources: {counts['sources']}; clips with their video file in this repository: {videos} of "
             f"{counts['clips']}{' (faces blurred)' if blur else ''}. An empty split has no file.", "",
             "## Loading", "",
             "```python",
             "from datasets import load_dataset",
             "",
             f'actions = load_dataset("PATH_OR_REPO", "{next(iter(present))}")  # or: ' +
             ", ".join(f'"{t}"' for t in present if t != next(iter(present))),
             "```", "",
             "Croissant (`croissant.json`, Croissant 1.1 with the Responsible-AI fields):", "",
             "```python",
             "import mlcroissant as mlc",
             "",
             'ds = mlc.Dataset(jsonld="croissant.json")',
             'for record in ds.records("actions"):',
             "    ...",
             "```", ""]
    if shards:
        first = shards[0].rsplit("-", 1)[0]
        lines += ["WebDataset (one sample per clip: `<clip>.json` with its boxes, labels, caption and QA pairs, "
                  "and `<clip>.mp4` when its video is here):", "",
                  "```python", "import webdataset as wds", "",
                  f'for sample in wds.WebDataset("{first}-000000.tar"):',
                  '    record, video = sample["json"], sample.get("mp4")', "```", ""]
    files = [["`data/<table>/<split>.parquet`, `data/<table>.parquet`", "the tables below"],
             ["`videos/<split>/<clip>.mp4`", "the clips whose source's licence allows redistribution"],
             ["`shards/<split>-NNNNNN.tar`", "WebDataset shards"],
             ["`splits.tsv`", "every clip's split and the version that first released it (read by the next release)"],
             ["`redownload.tsv`", "the sources with their URL, format and sha256 (`microg4m verify` checks them)"],
             ["`croissant.json`", "Croissant 1.1 with the RAI fields"], ["`CHANGES.md`", "what each release changed"]]
    if not shards:
        files.pop(2)
    if not videos:
        files.pop(1)
    lines += ["## Files", "", _table(files, ["path", "content"]), ""]
    lines += ["## Tables", ""]
    for t in present:
        spec = TABLES[t]
        lines += [f"### {t}", "", spec.description, "",
                  _table([[f"`{c.name}`", c.kind, c.description] for c in spec.columns], ["column", "type", "meaning"]),
                  ""]
    lines += ["## Videos and licences", "",
              "A source's clips are here as video files only when its licence allows redistribution "
              "(`release.videos`: from the licence each download recorded, or the licences table written by hand); "
              "otherwise table `clips` gives the source's URL and the clip's seconds (`start_s` to `end_s`), and "
              "`redownload.tsv` fetches the sources again.", "",
              _table(sources, ["source", "clips", "licence", "from", "video files"]), "",
              "## Splits", "",
              "Clip-level train / val / test as the export made them (the recipe of the MicroG-4M paper: seed, a "
              "greedy pass so that train covers every action, then 7:1:2, grouped as `export.split` says). A later "
              "release keeps every clip's split and assigns new clips around them; a withdrawn source leaves "
              "without moving any other clip (`splits.tsv`, `CHANGES.md`).", "",
              "## Datasheet", "", _datasheet(datasheet_md).rstrip("\n"), "",
              "## Responsible AI (Croissant RAI)", "",
              "The `rai:` fields of `croissant.json`; the authors fill in what is marked " + AUTHORS + ".", ""]
    for key, value in rai.items():
        text = ", ".join(value) if isinstance(value, list) else value
        lines += [f"- **{key}**: " + " ".join(str(text).split())]
    lines += ["", "## Citation", "", "```bibtex", (meta.get("citation") or f"{AUTHORS} a BibTeX entry").strip(),
              "```", ""]
    return "\n".join(lines)
