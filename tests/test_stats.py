"""Statistics tables against the released MicroG-4M ``statistics/dataset_statistics``.

The released tables below are copied from lei-qi-233/MicroG-4M
``statistics/dataset_statistics/{action_result,label_type_result,person_count}_all.csv``
(HEAD 3eac70c; UTF-8 with a BOM on disk). Feeding their counts back through our code
must give the same bytes (ratios, column names, BOM); only the order of tied action
counts in the released file is arbitrary (ours: by id).
"""

from __future__ import annotations

import csv
import io

import pandas as pd

from microg4m.formats import labels
from microg4m.report import stats

from conftest import REPO

LABEL_MAP = labels.read_label_map(REPO / "annotations" / "label_map.pbtxt")
BOM = b"\xef\xbb\xbf"

RELEASED_ACTIONS = """\
action_id,action_name,count,ratio(%)
12,stand,3218,24.27
79,"talk to (e.g., self, a person, a group)",3131,23.61
17,carry/hold (an object),3126,23.57
80,watch (a person),713,5.38
14,walk,369,2.78
59,touch (an object),353,2.66
61,"watch (e.g., TV)/any unspecified action",346,2.61
43,point to (an object),323,2.44
11,sit,252,1.9
36,lift/pick up,188,1.42
74,listen to (a person),148,1.12
69,hand wave,140,1.06
47,put down,138,1.04
62,work on a computer,110,0.83
30,enter,68,0.51
65,give/serve (an object) to (a person),46,0.35
29,eat,45,0.34
27,drink,43,0.32
66,grab (a person),41,0.31
34,hit (an object),33,0.25
45,pull (an object),32,0.24
38,"open (e.g., a window, a car door)",32,0.24
26,dress/undress clothing,31,0.23
64,fight/hit (a person),27,0.2
1,bend/bow (at the waist),26,0.2
6,get up,25,0.19
46,push (an object),24,0.18
28,operate spaceship,20,0.15
3,crouch/kneel,20,0.15
7,jump/leap,20,0.15
9,martial art,18,0.14
8,lie/sleep,17,0.13
60,"turn (e.g., a screwdriver)",17,0.13
70,hug (a person),16,0.12
78,take (an object) from (a person),15,0.11
48,read,15,0.11
22,"close (e.g., a door, a box)",13,0.1
10,run/jog,12,0.09
5,fall down,10,0.08
24,cut,9,0.07
57,text on/look at a cellphone,7,0.05
58,throw,4,0.03
68,hand shake,4,0.03
63,write,3,0.02
67,hand clap,3,0.02
76,push (another person),3,0.02
41,play musical instrument,3,0.02
56,take a photo,2,0.02
20,"climb (e.g., a mountain)",1,0.01
72,kiss (a person),1,0.01
"""

RELEASED_LABEL_TYPES = """\
label_type,count,ratio(%)
OBJECT_MANIPULATION,4986,37.6
PERSON_INTERACTION,4288,32.34
PERSON_MOVEMENT,3987,30.07
"""

RELEASED_PERSONS = """\
person_count,video_count,ratio(%)
1,3983,83.69
2,623,13.09
3,118,2.48
4,21,0.44
5,11,0.23
6,2,0.04
7,1,0.02
"""


def released_ava() -> pd.DataFrame:
    """AVA rows (one per action) with the released per-action counts."""
    rows = list(csv.reader(io.StringIO(RELEASED_ACTIONS)))[1:]
    ids = [int(r[0]) for r in rows for _ in range(int(r[2]))]
    return pd.DataFrame({"video_id": "x_000", "person_id": 1, "action_id": ids})


def written(tmp_path, df: pd.DataFrame) -> bytes:
    path = tmp_path / "t.csv"
    stats._write_bom_csv(path, df)
    return path.read_bytes()


def test_label_types_byte_identical(tmp_path):
    table = stats.label_type_table(released_ava(), LABEL_MAP)
    assert written(tmp_path, table) == BOM + RELEASED_LABEL_TYPES.encode()


def test_persons_per_clip_byte_identical(tmp_path):
    rows, k = [], 0
    for r in list(csv.reader(io.StringIO(RELEASED_PERSONS)))[1:]:
        for _ in range(int(r[1])):
            k += 1
            rows += [(f"c_{k:04d}", p) for p in range(1, int(r[0]) + 1)]
    table = stats.person_table(pd.DataFrame(rows, columns=["video_id", "person_id"]))
    assert written(tmp_path, table) == BOM + RELEASED_PERSONS.encode()


def test_action_counts_same_rows(tmp_path):
    table = stats.action_table(released_ava(), LABEL_MAP)
    ours = written(tmp_path, table)
    assert ours.startswith(BOM + b"action_id,action_name,count,ratio(%)\n")
    ours_rows = list(csv.reader(io.StringIO(ours[3:].decode())))
    released = list(csv.reader(io.StringIO(RELEASED_ACTIONS)))
    assert sorted(ours_rows[1:]) == sorted(released[1:])  # names, counts and ratio strings
    counts = [int(r[2]) for r in ours_rows[1:]]
    assert counts == sorted(counts, reverse=True)
    ties = [int(r[0]) for r in ours_rows[1:] if r[2] == "20"]
    assert ties == sorted(ties)  # ties by id (the released order is arbitrary)


def test_write_all_files(tmp_path):
    clips = pd.DataFrame({"clip_id": ["m_000", "r_000", "r_001"], "clip_type": ["m", "r", "r"]})
    ava = pd.DataFrame(
        {
            "video_id": ["m_000", "m_000", "r_000", "r_001", "r_001"],
            "person_id": [1, 1, 1, 1, 2],
            "action_id": [12, 79, 12, 17, 12],
        }
    )
    persons = ava[["video_id", "person_id"]].drop_duplicates()
    assignment = {"m_000": "train", "r_000": "val", "r_001": "test"}
    stats.write(tmp_path, label_map=LABEL_MAP, clips=clips, persons=persons, assignment=assignment, ava=ava)
    read = lambda name: (tmp_path / name).read_text(encoding="utf-8-sig").splitlines()  # noqa: E731
    assert read("action_result_movie.csv") == [
        "action_id,action_name,count,ratio(%)",
        "12,stand,1,50.0",
        '79,"talk to (e.g., self, a person, a group)",1,50.0',
    ]
    assert read("label_type_result_real.csv") == [
        "label_type,count,ratio(%)",
        "PERSON_MOVEMENT,2,66.67",
        "OBJECT_MANIPULATION,1,33.33",
    ]
    assert read("person_count_real.csv") == ["person_count,video_count,ratio(%)", "1,1,50.0", "2,1,50.0"]
    assert (tmp_path / "overall_result.csv").read_text().splitlines() == [
        "type of amount,number", "all video,3", "movie,1", "real,2", "all action,5", "movie action,2",
        "real action,3", "all action type,3", "movie action type,2", "real action type,2",
    ]  # fmt: skip
    assert read("split_result.csv") == [
        "split,video_count,person_count,row_count",
        "train,1,1,2",
        "val,1,1,1",
        "test,1,2,2",
        "all,3,4,5",
    ]
    assert not (tmp_path / "overall_result.csv").read_bytes().startswith(BOM)  # as released
    for png in ("action_distribution.png", "persons_per_clip.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    first = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    stats.write(tmp_path, label_map=LABEL_MAP, clips=clips, persons=persons, assignment=assignment, ava=ava)
    assert first == {p.name: p.read_bytes() for p in tmp_path.iterdir()}


def test_action_plot_uses_log_scale(tmp_path, monkeypatch):
    seen = {}
    real_save = stats._save

    def spy(fig, path):
        seen[path.name] = fig.axes[0].get_yscale()
        real_save(fig, path)

    monkeypatch.setattr(stats, "_save", spy)
    clips = pd.DataFrame({"clip_id": ["r_000"], "clip_type": ["r"]})
    ava = pd.DataFrame({"video_id": ["r_000"] * 3, "person_id": [1] * 3, "action_id": [12, 12, 80]})
    stats.write(
        tmp_path,
        label_map=LABEL_MAP,
        clips=clips,
        persons=ava[["video_id", "person_id"]].drop_duplicates(),
        assignment={"r_000": "train"},
        ava=ava,
    )
    assert seen == {"action_distribution.png": "log", "persons_per_clip.png": "linear"}
