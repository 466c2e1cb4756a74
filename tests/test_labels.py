"""Label map, actions table and actions.csv reading."""

from __future__ import annotations

import pytest

from microg4m.formats import labels

from conftest import REPO
from labels_io import read_actions_table, write_actions_table, write_label_map

LABEL_MAP = REPO / "annotations" / "label_map.pbtxt"
ACTIONS_TABLE = REPO / "annotations" / "actions_table.csv"


def slowfast_read_labelmap(path):
    """PySlowFast's read_labelmap (slowfast/utils/ava_eval_helper.py; mmaction2's
    mmaction/evaluation/functional/ava_utils.py is the same): a line counts only when it
    starts with exactly two spaces and ``name:`` / ``id:`` / ``label_id:``."""
    out, name = [], ""
    for line in open(path, encoding="utf-8"):
        if line.startswith("  name:"):
            name = line.split('"')[1]
        elif line.startswith("  id:") or line.startswith("  label_id:"):
            out.append((int(line.strip().split(" ")[-1]), name))
    return out


def test_released_label_map_parses_and_round_trips(tmp_path):
    df = labels.read_label_map(LABEL_MAP)
    assert len(df) == 50 and df["id"].is_unique
    assert set(df["label_type"]) == set(labels.LABEL_TYPES)
    # AVA ids kept: movement 1-14, object 15-63, interaction 64-80
    spans = {"PERSON_MOVEMENT": (1, 14), "OBJECT_MANIPULATION": (15, 63), "PERSON_INTERACTION": (64, 80)}
    for r in df.itertuples():
        lo, hi = spans[r.label_type]
        assert lo <= r.id <= hi, r
    out = tmp_path / "label_map.pbtxt"
    write_label_map(df, out)
    assert out.read_bytes() == LABEL_MAP.read_bytes()
    assert slowfast_read_labelmap(out) == list(zip(df["id"], df["name"]))


def test_actions_table_is_generated_from_the_label_map(tmp_path):
    df = labels.read_label_map(LABEL_MAP)
    out = tmp_path / "actions_table.csv"
    write_actions_table(df, out)
    assert ACTIONS_TABLE.read_bytes() == out.read_bytes(), "regenerate annotations/actions_table.csv"
    table = read_actions_table(ACTIONS_TABLE)
    assert table.equals(df)
    assert table.loc[table["id"] == 79, "name"].item() == "talk to (e.g., self, a person, a group)"


@pytest.mark.parametrize(
    "text, message",
    [
        ('item {\n   name: "a"\n  id: 1\n  label_type: PERSON_MOVEMENT\n}', "two leading spaces"),
        ('item {\n\tname: "a"\n  id: 1\n  label_type: PERSON_MOVEMENT\n}', "two leading spaces"),
        ('item {\n  name: "a"\n  id: x\n  label_type: PERSON_MOVEMENT\n}', "positive integer"),
        ('item {\n  name: "a"\n  id: 1\n  label_type: RUNNING\n}', "unknown label_type"),
        ('item {\n  name: "a"\n  id: 1\n}', "without label_type"),
        ('item {\n  name: "a"\n  id: 1\n  label_type: PERSON_MOVEMENT\n', "not closed"),
        (
            'item {\n  name: "a"\n  id: 1\n  label_type: PERSON_MOVEMENT\n}\n\n'
            'item {\n  name: "b"\n  id: 1\n  label_type: PERSON_MOVEMENT\n}',
            "duplicate id",
        ),
        ("", "no items"),
    ],
)
def test_bad_label_map_names_file_and_reason(tmp_path, text, message):
    path = tmp_path / "bad.pbtxt"
    path.write_text(text)
    with pytest.raises(labels.LabelError) as err:
        labels.read_label_map(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_read_actions_rows_lines_and_bom(tmp_path):
    path = tmp_path / "actions.csv"
    path.write_text(
        "\ufeffvideo_id,movie_or_real,person_id,action\nA_000,r,1,12\n\nA_001, m ,2,17,9\n", encoding="utf-8"
    )
    df = labels.read_actions(path)
    assert df["line"].tolist() == [2, 4]
    assert df.iloc[1][["video_id", "movie_or_real", "person_id", "action", "fields"]].tolist() == [
        "A_001",
        "m",
        "2",
        "17",
        5,
    ]
    assert df.iloc[1]["raw"] == "A_001, m ,2,17,9"


def test_read_actions_bad_header(tmp_path):
    path = tmp_path / "actions.csv"
    path.write_text("clip,type,person,action\nA_000,r,1,12\n")
    with pytest.raises(labels.LabelError, match="header"):
        labels.read_actions(path)
