"""The export's datasheet (after Gebru et al.), sources.csv and redownload.tsv.

The real-run checks reuse the bad-inputs workflow run of tests/test_bad_inputs.py (22
sources, half failing in different ways): its export must list exactly the sources that
gave clips to the dataset, with their provenance, and a datasheet whose counts are
those of the export's own files. ``facts``/``render`` are also tested on small tables.
"""

from __future__ import annotations

import hashlib
import re

import pandas as pd
import pytest

from microg4m.report import datasheet
from microg4m.formats import provenance
from microg4m.formats.sources import load_sources
from test_bad_inputs import bad_inputs_run
from microg4m.formats.records import records_frame

SECTIONS = ["Motivation", "Composition", "Collection process", "Preprocessing, cleaning, labelling", "Uses",
            "Distribution", "Maintenance"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return bad_inputs_run(tmp_path_factory)


def tsv(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


def test_sources_csv_lists_the_sources_of_the_dataset_with_their_provenance(run):
    export, res = run / "results" / "export", run / "results"
    sources = pd.read_csv(export / "sources.csv", dtype=str, keep_default_na=False)
    assert list(sources.columns) == provenance.SOURCES_CSV_COLUMNS
    in_dataset = pd.concat(pd.read_csv(p, sep=" ", dtype=str) for p in sorted((export / "frame_lists").glob("*.csv")))
    clips = in_dataset.drop_duplicates("video_id").video_id.str.rsplit("_", n=1).str[0].value_counts()
    assert sorted(sources.source_id) == sorted(clips.index) and "good" in set(sources.source_id)
    records = records_frame(sorted(res.glob("download/*.tsv"))).set_index("source_id")
    for row in sources.itertuples():
        assert int(row.clips) == clips[row.source_id]
        rec = records.loc[row.source_id]
        assert rec["status"] == "ok" and row.url == rec["url"] and row.sha256 == rec["sha256"]
        assert hashlib.sha256((res / rec["path"]).read_bytes()).hexdigest() == row.sha256
        if row.clip_type == "r":  # through yt-dlp (file:// URLs here)
            assert row.extractor == "Generic" and row.ytdlp_version and row.downloaded_at and row.format_id
        else:
            assert row.extractor == "local file" and row.ytdlp_version == ""


def test_redownload_tsv_is_a_sources_table(run):
    export = run / "results" / "export"
    table = load_sources(export / "redownload.tsv")  # validated like any sources table
    sources = pd.read_csv(export / "sources.csv", dtype=str, keep_default_na=False)
    assert list(table.index) == list(sources.source_id)
    assert list(tsv(export / "redownload.tsv").columns) == provenance.REDOWNLOAD_COLUMNS


def _count(text: str, label: str) -> int:
    m = re.search(rf"{re.escape(label)}\s*(\d+)", text)
    assert m, label
    return int(m.group(1))


def test_the_datasheet_holds_the_runs_counts_and_prompts(run):
    export, res = run / "results" / "export", run / "results"
    text = (export / "datasheet.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings == SECTIONS
    assert text.count(datasheet.PROMPT) == len(SECTIONS)  # one prompt per section for the authors
    ledger = tsv(res / "ledger.tsv")
    src = ledger[ledger.level == "source"]
    sources = pd.read_csv(export / "sources.csv", dtype=str)
    assert f"Sources: {len(sources)} in the dataset, of {len(src)} in the sources table" in text
    assert f"{(src.status == 'downloaded').sum()} downloaded, {(src.status == 'failed').sum()} failed" in text
    for cls, n in src[src.status == "failed"].reason_class.value_counts().items():
        assert f"  - {cls}: {n}\n" in text
    n_clips = sum(len(p.read_text().split()) for p in (export / "splits").glob("*_video_ids.txt"))
    assert _count(text, "Clips:") == n_clips > 0
    boxes = pd.read_csv(export / "boxes.csv")
    assert _count(text, "Persons (boxes at keyframes):") == len(boxes.drop_duplicates(["video_id", "person_id"]))
    assert "no action labels yet" in text  # this run has no labels
    licences = sources.license.fillna("not reported").value_counts()
    for lic, n in licences.items():
        assert f"  - {lic}: {n}" in text


def test_the_datasheet_is_in_the_report_patterns():
    rule = open("workflow/rules/export.smk").read()
    assert '"{name}.md"' in rule


def test_facts_and_render_on_small_tables():
    clips = pd.DataFrame({"clip_id": ["a_000", "a_001", "b_000", "c_000"], "source_id": ["a", "a", "b", "c"],
                          "clip_type": ["r", "r", "m", "r"]})
    assignment = {"a_000": "train", "a_001": "test", "b_000": "train"}
    prov = pd.DataFrame({"source_id": ["a", "b", "c", "d", "e"], "status": ["ok", "ok", "ok", "failed", "failed"],
                         "reason_class": ["", "", "", "bot_check", "bot_check"]})
    sources = pd.DataFrame({"source_id": ["a", "b"], "license": ["Creative Commons Attribution license", ""]})
    persons = pd.DataFrame({"video_id": ["a_000", "a_000", "b_000"], "person_id": [1, 2, 1]})
    ava = pd.DataFrame({"video_id": ["a_000", "a_000", "b_000"], "person_id": [1, 2, 1], "action_id": [3, 5, 3]})
    lmap = pd.DataFrame({"id": [3, 5, 7], "name": ["talk", "walk", "sit"]})
    f = datasheet.facts(provenance=prov, sources=sources, clips=clips, assignment=assignment, persons=persons,
                        ava=ava, label_map=lmap)
    assert f.sources_listed == 5 and f.sources_downloaded == 3 and f.failed_by_class == {"bot_check": 2}
    assert f.sources_in_dataset == 2 and f.clips == 3 and f.clips_listed == 4
    assert f.clips_by_type == {"real footage (r)": 2, "film (m)": 1}
    assert f.persons == 3 and f.label_rows == 3 and f.actions_used == 2 and f.actions_in_map == 3
    assert f.action_counts == {"talk (3)": 2, "walk (5)": 1}
    assert f.splits == {"train": 2, "val": 0, "test": 1}
    assert f.licences == {"Creative Commons Attribution license": 1, "not reported": 1}
    text = datasheet.render(f)
    assert re.findall(r"^## (.+)$", text, re.M) == SECTIONS
    assert "3 label rows, 2 of the label map's 3 actions used" in text
    assert "  - bot_check: 2" in text and "  - val: 0" in text
