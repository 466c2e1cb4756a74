"""The release's parts that are pure logic (tests/test_release.py runs the whole release on
the demo): which licences allow video files, the withdrawals and licences tables, the
authors' metadata, the RAI fields and their marks, CHANGES.md, deterministic shards."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from microg4m import config
from microg4m.formats.licences import read_licences
from microg4m.formats.withdrawals import read_withdrawn
from microg4m.release import changes, history, licences, rai, shards
from microg4m.release.metadata import AUTHORS, read_metadata
from microg4m.stages import release

PATTERNS = config.defaults()["release"]["redistributable"]


@pytest.mark.parametrize("licence, allowed", [
    ("Creative Commons Attribution license (reuse allowed)", True),  # YouTube's CC BY
    ("CC-BY-4.0", True), ("CC BY-SA 4.0", True), ("cc0-1.0", True), ("Public Domain", True),
    ("https://creativecommons.org/licenses/by/3.0/", True),
    ("https://creativecommons.org/licenses/by-nc/4.0/", False), ("CC-BY-NC-4.0", False), ("CC BY-ND 4.0", False),
    ("standard YouTube licence (yt-dlp reports no licence)", False), ("All rights reserved", False),
])
def test_auto_carries_the_videos_of_redistributable_licences_only(licence, allowed):
    src = pd.DataFrame({"source_id": ["a"], "license": [licence]})
    assert licences.decide(src, mode="auto", patterns=PATTERNS, by_hand={})["videos"].tolist() == [allowed]


def test_the_licences_table_comes_first_and_true_false_decide_for_every_source():
    src = pd.DataFrame({"source_id": ["yt", "film", "cc"],
                        "license": ["standard YouTube licence (yt-dlp reports no licence)", "", "CC-BY-4.0"]})
    d = licences.decide(src, mode="auto", patterns=PATTERNS, by_hand={"film": "CC0-1.0"}).set_index("source_id")
    assert d.loc["film"].tolist() == ["CC0-1.0", licences.FROM_TABLE, True]
    assert d.loc["yt", "license_from"] == licences.FROM_RECORD and not d.loc["yt", "videos"]
    nothing = licences.decide(src.assign(license=""), mode="auto", patterns=[".*"], by_hand={})
    assert nothing["license"].tolist() == [licences.NOT_REPORTED] * 3 and not nothing["videos"].any()
    assert licences.decide(src, mode=True, patterns=[], by_hand={})["videos"].all()
    assert not licences.decide(src, mode=False, patterns=PATTERNS, by_hand={})["videos"].any()
    with pytest.raises(ValueError, match="release.videos must be auto, true or false"):
        licences.decide(src, mode="yes", patterns=PATTERNS, by_hand={})
    with pytest.raises(ValueError, match=r"release.redistributable: '\(' is no regular expression"):
        licences.decide(src, mode="auto", patterns=["("], by_hand={})


def test_withdrawals_are_read_strictly(tmp_path):
    path = tmp_path / "withdrawn.tsv"
    assert read_withdrawn(path) == {} and read_withdrawn(None) == {}
    path.write_text("# asked by mail\nsource_id\tdate\treason\nabc\t2026-02-01\towner's request\n\n")
    assert read_withdrawn(path) == {"abc": {"date": "2026-02-01", "reason": "owner's request", "line": 3}}
    path.write_text("source_id\tdate\treason\nabc\t2026-02-01\tx\nabc\t2026-02-02\ty\n../x\t2026-01-01\tz\n"
                    "d\t\tz\n")
    with pytest.raises(ValueError) as err:
        read_withdrawn(path)
    assert str(err.value) == (f"withdrawals {path}: line 3: source abc is also on line 2; line 4: source_id '../x' "
                              "has characters outside [A-Za-z0-9_-]; line 5: empty date")
    path.write_text("source_id\tdate\treason\nabc\t1 Feb 2026\tx\n")
    with pytest.raises(ValueError, match="line 2: date '1 Feb 2026' is not YYYY-MM-DD"):
        read_withdrawn(path)
    path.write_text("source_id\treason\nabc\tx\n")
    with pytest.raises(ValueError, match="line 1: the header lacks date"):
        read_withdrawn(path)


def test_licences_by_hand(tmp_path):
    path = tmp_path / "licences.tsv"
    path.write_text("source_id\tlicense\nfilm\tCC0-1.0\n")
    assert read_licences(path) == {"film": "CC0-1.0"} and read_licences(tmp_path / "none.tsv") == {}


def test_the_authors_metadata_is_checked(tmp_path):
    path = tmp_path / "release.yaml"
    path.write_text("name: X\ncreators: [{name: A}]\nrai: {annotatorDemographics: two students}\n")
    assert read_metadata(path, rai.FIELDS)["rai"] == {"annotatorDemographics": "two students"}
    assert read_metadata(tmp_path / "missing.yaml", rai.FIELDS) == {}
    path.write_text("nmae: X\n")
    with pytest.raises(ValueError, match=r"\(top\): Additional properties are not allowed \('nmae' was unexpected\)"):
        read_metadata(path, rai.FIELDS)
    path.write_text("rai: {annotatorDemographic: x}\n")
    with pytest.raises(ValueError, match="rai: unknown field\\(s\\) annotatorDemographic"):
        read_metadata(path, rai.FIELDS)
    path.write_text("creators: [{email: a@b}]\n")
    with pytest.raises(ValueError, match="creators.0: 'name' is a required property"):
        read_metadata(path, rai.FIELDS)


def test_rai_fields_mark_what_only_the_authors_can_say():
    known = rai.Known(version="1.0.0", sources=2, sources_listed=3, downloaded_sources=2, persons=4,
                      download_dates=["2026-01-02", "2026-01-05"], licences={"CC-BY-4.0": 2})
    out = rai.fields(known, {})
    assert set(out) == set(rai.FIELDS)
    assert out["annotatorDemographics"].startswith(AUTHORS)  # nothing recorded: the question only
    assert out["dataCollection"].startswith(AUTHORS) and "Recorded by microg4m: 2 source videos" in out[
        "dataCollection"]
    assert not out["dataPreprocessingProtocol"].startswith(AUTHORS)  # the pipeline knows it all
    assert out["dataCollectionTimeFrame"] == ["2026-01-02", "2026-01-05"]
    assert out["dataCollectionType"] == ["Web Scraping"]
    given = rai.fields(known, {"dataCollection": "Chosen by hand from NASA's channel.", "dataSocialImpact": "None."})
    assert given["dataCollection"].startswith("Chosen by hand from NASA's channel.\n\nRecorded by microg4m: 2 source")
    assert given["dataSocialImpact"] == "None." and AUTHORS not in given["dataSocialImpact"]


def test_changes_keep_the_history_below_the_new_section():
    first = changes.document(changes.section(version="1.0.0", date="2026-01-01", previous_version="", withdrawn={},
                                             removed={}, added={"train": 2}, table_changes={}, notes=[]), "")
    second = changes.document(changes.section(
        version="1.1.0", date="2026-02-01", previous_version="1.0.0",
        withdrawn={"abc": {"date": "2026-01-20", "reason": "owner's request", "clips": {"train": 1, "test": 2}}},
        removed={"x_000": "val"}, added={"test": 1}, table_changes={"actions": (2, 1)}, notes=["a note"]), first)
    assert second.startswith("# Changes\n\n## 1.1.0 (2026-02-01)\n\nSince 1.0.0.")
    assert "- abc: withdrawn 2026-01-20, owner's request; clips left out: train 1, test 2" in second
    assert "Clips no longer in the export (filter, labels or sources changed): 1 (val 1)." in second
    assert "- actions: 2 row(s) added, 1 removed" in second and "- note: a note" in second
    assert second.count("# Changes") == 1 and second.index("## 1.1.0") < second.index("## 1.0.0 (2026-01-01)")


def test_shards_are_deterministic_and_cut_by_count_and_size(tmp_path, monkeypatch):
    import webdataset as wds

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    video = tmp_path / "v.mp4"
    video.write_bytes(b"\x00\x01" * 5000)
    samples = {"train": [(f"s_{i:03d}", {"video_id": f"s_{i:03d}", "n": i}, video if i % 2 else None)
                         for i in reversed(range(5))], "test": [("t_000", {"video_id": "t_000"}, None)]}
    paths = []
    for run in ("a", "b"):
        written = shards.write(tmp_path / run, samples, max_samples=2)
        assert written == ["shards/train-000000.tar", "shards/train-000001.tar", "shards/train-000002.tar",
                           "shards/test-000000.tar"]
        paths.append({w: hashlib.sha256((tmp_path / run / w).read_bytes()).hexdigest() for w in written})
    assert paths[0] == paths[1]
    got = list(wds.WebDataset(sorted(str(p) for p in (tmp_path / "a" / "shards").glob("train-*.tar")),
                              shardshuffle=False))
    assert [s["__key__"] for s in got] == [f"s_{i:03d}" for i in range(5)]  # clip-id order
    assert [json.loads(s["json"])["n"] for s in got] == list(range(5))
    assert [s.get("mp4") == video.read_bytes() for s in got] == [False, True, False, True, False]
    # a sample counts its JSON, its mp4 and 2 kB of tar headers: 2 + 12 + 2 kB, then 12 + 2 kB under 25 kB
    by_size = shards.write(tmp_path / "c", {"train": samples["train"]}, max_samples=100, max_size_mb=0.025)
    keys = [[s["__key__"] for s in wds.WebDataset(str(tmp_path / "c" / w), shardshuffle=False)] for w in by_size]
    assert keys == [["s_000", "s_001", "s_002"], ["s_003", "s_004"]]


def test_splits_tsv_is_read_strictly(tmp_path):
    path = tmp_path / "splits.tsv"
    path.write_text("video_id\tsource_id\tsplit\tadded\na_000\ta\ttrain\t1.0.0\na_001\ta\tdev\t1.0.0\n")
    with pytest.raises(ValueError, match="a_001 has split 'dev'"):
        history.read_splits(path)
    with pytest.raises(ValueError, match="no splits.tsv; not a release folder"):
        history.read_previous(tmp_path / "nothing")


def test_the_previous_release_is_another_folder_and_version(tmp_path):
    with pytest.raises(ValueError, match="is inside the release's own folder"):
        release.run(results=tmp_path, out_dir=tmp_path / "release", previous=tmp_path / "release")
    prev = tmp_path / "v1"
    prev.mkdir()
    (prev / "splits.tsv").write_text("video_id\tsource_id\tsplit\tadded\n")
    (prev / "croissant.json").write_text('{"version": "1.0.0"}')
    (tmp_path / "export").mkdir()
    with pytest.raises(ValueError, match="release.version 1.0.0 is the version of release.previous"):
        release.run(results=tmp_path, out_dir=tmp_path / "release", previous=prev, version="1.0.0")
