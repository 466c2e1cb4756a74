"""Agreement measures and the merge of several annotators' actions files (``microg4m agreement``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from microg4m.formats import labels
from microg4m.annotate import agreement as ag
from microg4m.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]
LABEL_MAP = REPO / "annotations" / "label_map.pbtxt"
LMAP = labels.read_label_map(LABEL_MAP)
HEADER = "video_id,movie_or_real,person_id,action\n"


def write(path: Path, rows: str) -> Path:
    path.write_text(HEADER + rows)
    return path


def load(path: Path) -> ag.Labels:
    return ag.read_labels(path, set(LMAP["id"]))


@pytest.fixture
def two(tmp_path):
    """alice and bob on clip c_000 (persons 1, 2); only alice did c_001."""
    a = write(tmp_path / "actions.alice.csv", "c_000,r,1,11\nc_000,r,1,12\nc_000,r,2,12\nc_001,m,1,79\n")
    b = write(tmp_path / "actions.bob.csv", "c_000,r,1,11\nc_000,r,2,12\nc_000,r,2,14\n")
    return a, b


def test_measures_by_hand(two):
    merged, clips, actions, ann, summary = ag.compare([load(p) for p in two], LMAP, "majority")
    c0 = clips.set_index("clip_id").loc["c_000"]
    # person 1: {11, 12} vs {11}; person 2: {12} vs {12, 14} -> no exact match, 4 labels, 2 agreed
    assert (c0.annotators, c0.persons, c0.exact_persons, c0.exact_share) == (2, 2, 0, 0.0)
    assert (c0.labels_union, c0.labels_agreed, c0.differing, c0.merged) == (4, 2, 2, 2)
    a = actions.set_index("action_id")
    # action 11: both chose it for person 1, neither for person 2 -> perfect agreement
    assert (a.at[11, "both"], a.at[11, "one_only"], a.at[11, "positive_agreement"], a.at[11, "kappa"]) == \
        (1, 0, 1.0, 1.0)
    # action 12: alice (yes, yes), bob (no, yes): po = 0.5, pe = (2*1 + 0*1) / 4 = 0.5 -> kappa 0
    assert (a.at[12, "both"], a.at[12, "one_only"], a.at[12, "positive_agreement"], a.at[12, "kappa"]) == \
        (1, 1, 0.6667, 0.0)
    # action 14: only bob, once: po = 0.5, pe = (0*1 + 2*1) / 4 = 0.5 -> kappa 0, positive agreement 0
    assert (a.at[14, "positive_agreement"], a.at[14, "kappa"]) == (0.0, 0.0)
    # never chosen in a shared clip: positive agreement and kappa undefined (c_001 is alice's only)
    assert a.at[79, "chosen"] == 1 and pd.isna(a.at[79, "positive_agreement"]) and pd.isna(a.at[79, "kappa"])
    # majority of two = both agree; the clip only alice labelled keeps her labels
    assert merged.values.tolist() == [["c_000", "r", 1, 11], ["c_000", "r", 2, 12], ["c_001", "m", 1, 79]]
    per = ann.set_index("annotator")
    assert per.loc["alice", ["clips", "labels", "differing", "corrected"]].tolist() == [2, 4, 2, 1]
    assert per.loc["bob", ["clips", "labels", "differing", "corrected"]].tolist() == [1, 3, 2, 1]
    assert pd.isna(clips.set_index("clip_id").at["c_001", "exact_share"])  # one annotator: no agreement
    assert summary["clips_shared"] == 1 and summary["exact_share"] == 0.0 and summary["differing"] == 2
    assert summary["positive_agreement"] == round(2 * 2 / (2 * 2 + 2), 4)


def test_rules_union_and_all(two):
    files = [load(p) for p in two]
    union = ag.compare(files, LMAP, "union")[0]
    assert union.values.tolist() == [["c_000", "r", 1, 11], ["c_000", "r", 1, 12], ["c_000", "r", 2, 12],
                                     ["c_000", "r", 2, 14], ["c_001", "m", 1, 79]]
    every = ag.compare(files, LMAP, "all")[0]
    assert every.values.tolist() == [["c_000", "r", 1, 11], ["c_000", "r", 2, 12], ["c_001", "m", 1, 79]]
    with pytest.raises(ValueError, match="rule must be one of"):
        ag.compare(files, LMAP, "most")


def test_identical_files_agree_fully(tmp_path, two):
    a = two[0]
    b = write(tmp_path / "actions.copy.csv", a.read_text().split("\n", 1)[1])
    merged, clips, actions, ann, summary = ag.compare([load(a), load(b)], LMAP)
    assert clips["exact_share"].tolist() == [1.0, 1.0] and clips["differing"].sum() == 0
    used = actions[actions["both"] > 0]
    assert set(used["action_id"]) == {11, 12, 79} and (used["kappa"] == 1.0).all()
    assert ann["corrected"].tolist() == [0, 0]
    assert summary["exact_share"] == 1.0 and len(merged) == 4


def test_three_annotators_majority_and_the_five_action_limit(tmp_path):
    a = write(tmp_path / "actions.a.csv", "c_000,r,1,11\nc_000,r,1,12\nc_000,r,1,14\nc_000,r,1,17\nc_000,r,1,43\n")
    b = write(tmp_path / "actions.b.csv", "c_000,r,1,11\nc_000,r,1,59\nc_000,r,1,79\nc_000,r,1,80\nc_000,r,1,12\n")
    c = write(tmp_path / "actions.c.csv", "c_000,r,1,11\nc_000,r,1,14\n")
    files = [load(a), load(b), load(c)]
    merged = ag.compare(files, LMAP, "majority")[0]
    assert merged["action"].tolist() == [11, 12, 14]  # 3, 2 and 2 votes of 3
    merged, clips = ag.compare(files, LMAP, "union")[:2]
    # 8 different actions: the five with the most votes stay (11: 3, 12: 2, 14: 2, then first seen 17, 43)
    assert merged["action"].tolist() == [11, 12, 14, 17, 43]
    assert clips.at[0, "dropped_over_limit"] == 3 and clips.at[0, "merged"] == 5


def test_run_writes_the_merge_and_reports_through_the_cli(tmp_path, two, capsys):
    out = tmp_path / "merged" / "actions.csv"
    assert cli_main(["agreement", *map(str, two), "--out", str(out), "--label-map", str(LABEL_MAP)]) == 0
    assert '"clips_shared": 1' in capsys.readouterr().out
    assert out.read_text() == HEADER + "c_000,r,1,11\nc_000,r,2,12\nc_001,m,1,79\n"
    assert labels.read_actions(out)["action"].tolist() == ["11", "12", "79"]  # the export's reader
    for name in ("clips", "actions", "annotators"):
        assert (out.parent / f"agreement_{name}.tsv").is_file()
    head = (out.parent / "agreement_annotators.tsv").read_text().splitlines()
    assert head[0] == "annotator\tfile\tclips\tlabels\tdiffering\tcorrected"
    assert head[1].startswith("alice\t") and head[1].endswith("\t2\t4\t2\t1")


@pytest.mark.parametrize("rows, message", [
    ("c_000,r,1,2\n", r"actions.bad.csv:2: unknown action '2'"),
    ("c_000,r,1,walk\n", r"actions.bad.csv:2: unknown action 'walk'"),
    ("c_000,r,0,12\n", r"actions.bad.csv:2: person_id '0' is not a positive integer"),
    ("c_000,x,1,12\n", r"movie_or_real must be m or r"),
    ("c_000,r,1,12\nc_000,m,2,12\n", r"actions.bad.csv:3: c_000 is 'm' here but 'r'"),
    ("c_000,r,1\n", r"actions.bad.csv:2: 3 fields, expected 4"),
])
def test_bad_rows_are_refused_and_nothing_written(tmp_path, two, rows, message):
    bad = write(tmp_path / "actions.bad.csv", rows)
    out = tmp_path / "out" / "merged.csv"
    with pytest.raises(ValueError, match=message):
        ag.run([two[0], bad], out, label_map=LABEL_MAP)
    assert not (tmp_path / "out").exists()


def test_bad_calls_are_refused_and_nothing_written(tmp_path, two, capsys):
    a, b = two
    out = tmp_path / "out" / "merged.csv"
    with pytest.raises(ValueError, match="at least two"):
        ag.run([a], out, label_map=LABEL_MAP)
    with pytest.raises(ValueError, match="given twice"):
        ag.run([a, tmp_path / "." / a.name], out, label_map=LABEL_MAP)
    before = a.read_bytes()
    with pytest.raises(ValueError, match="is an input"):
        ag.run([a, b], a, label_map=LABEL_MAP)
    assert a.read_bytes() == before
    other = tmp_path / "x"
    other.mkdir()
    with pytest.raises(ValueError, match="same annotator name"):
        ag.run([a, write(other / a.name, "c_000,r,1,11\n")], out, label_map=LABEL_MAP)
    (tmp_path / "actions.hdr.csv").write_text("clip,person,action\n")
    with pytest.raises(ValueError, match="header clip,person,action"):
        ag.run([a, tmp_path / "actions.hdr.csv"], out, label_map=LABEL_MAP)
    with pytest.raises(ValueError, match="c_001 is 'r' in .*actions.carol.csv but 'm'"):
        ag.run([a, write(tmp_path / "actions.carol.csv", "c_001,r,1,79\n")], out, label_map=LABEL_MAP)
    assert cli_main(["agreement", str(a), str(tmp_path / "missing.csv"), "--out", str(out),
                     "--label-map", str(LABEL_MAP)]) == 1
    assert "missing.csv: cannot read actions" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_kappa_formula():
    assert ag._kappa(0, 0, 0, 0) is None
    assert ag._kappa(5, 0, 0, 0) is None  # everyone always yes: chance agreement is 1
    assert ag._kappa(20, 5, 10, 15) == pytest.approx((35 / 50 - (25 * 30 + 25 * 20) / 2500) / (1 - 0.5))
