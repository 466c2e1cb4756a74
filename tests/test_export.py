"""AVA export: keyframes, label validation, a round trip with real clips and frames,
the mmaction2 mapping, and byte-identical re-runs."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import loaders
from microg4m import CLIP_FRAMES
from microg4m.stages import export, frames
from microg4m.formats import labels, manifest
from microg4m.common import media

from conftest import REPO, get_footage, make_clip
from test_labels import slowfast_read_labelmap
from microg4m.formats.frame_lists import FRAME_LIST_HEADER, frame_path
from microg4m.formats.tracks import COLUMNS as TRACK_COLUMNS

LABEL_MAP = REPO / "annotations" / "label_map.pbtxt"
TRACK_HEADER = "video_id,frame_id,person_id,xmin,ymin,xmax,ymax,conf"


# ---------------------------------------------------------------- helpers


def write_source(root: Path, src: str, ctype: str, clips: dict, keep: dict | None = None, size=(640, 480)):
    """clips/{src}/manifest.tsv and filter/{src}.tsv; ``clips``: clip -> status ('ok' or 'dropped')."""
    rows = [
        dict(
            clip_id=c,
            source_id=src,
            clip_type=ctype,
            seq=int(c[-3:]),
            start_s=3 * int(c[-3:]),
            frames=90 if st == "ok" else 40,
            width=size[0],
            height=size[1],
            status=st,
            reason="" if st == "ok" else "short final clip",
        )
        for c, st in clips.items()
    ]
    manifest.write_manifest(root / "clips" / src / "manifest.tsv", rows)
    keep = keep or {}
    dec = [
        dict(
            clip_id=c,
            person_share=0.9,
            cuts="",
            keep=keep.get(c, 1),
            reason="kept" if keep.get(c, 1) else "few_persons",
        )
        for c, st in clips.items()
        if st == "ok"
    ]
    (root / "filter").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(dec).to_csv(root / "filter" / f"{src}.tsv", sep="\t", index=False)


def write_tracks(path: Path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TRACK_HEADER + "\n" + "".join(",".join(map(str, r)) + ",0.9\n" for r in rows))


def inputs(root: Path) -> dict:
    return dict(
        manifests=sorted(root.glob("clips/*/manifest.tsv")),
        decisions=sorted(root.glob("filter/*.tsv")),
        tracks=sorted(root.glob("tracks/*.csv")),
        label_map=LABEL_MAP,
    )


def read_rows(path: Path) -> list[list[str]]:
    return [line.split(",") for line in path.read_text().splitlines()]


def tree_bytes(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- keyframes (pure logic)


def test_keyframe_median_ties_earliest_and_box_format():
    clips = pd.DataFrame({"clip_id": ["a_000"], "width": [518], "height": [496], "frames": [90]}).set_index(
        "clip_id", drop=False
    )
    rows = [("a_000", f, 1, 100 + f, 50, 300 + f, 490) for f in (86, 1, 6, 41, 46)]  # unordered; median 41
    rows += [("a_000", f, 2, 100 + f, 50, 300 + f, 490) for f in (10, 20, 30, 40)]  # median 25: tie 20/30 -> 20
    rows += [("a_000", 7, 3, -12.5, -3, 530, 600)]  # outside the frame -> clamped
    rows += [("a_000", 9, 4, 700, 10, 800, 20)]  # entirely right of the frame -> empty box
    t = pd.DataFrame(rows, columns=TRACK_COLUMNS[:-1])  # no conf: keyframes do not read it
    rep = export.Report()
    kf = export.keyframes(t, clips, rep)
    assert kf["frame_stamp"].tolist() == [41, 20, 7]
    first = kf.iloc[0]
    assert [export.fmt(first[c]) for c in export.BOX] == ["0.272", "0.101", "0.658", "0.988"]
    assert [export.fmt(kf.iloc[2][c]) for c in export.BOX] == ["0.0", "0.0", "1.0", "1.0"]
    assert rep.rows == [("tracks", "a_000", "person 4: empty box at keyframe 9 after normalising; no keyframe")]


def test_fmt_like_released():
    assert [export.fmt(np.round(v, 3)) for v in (0.99, 0.985, 1.0, 0.0, 0.1004999, 0.27)] == [
        "0.99",
        "0.985",
        "1.0",
        "0.0",
        "0.1",
        "0.27",
    ]


# ---------------------------------------------------------------- label validation


@pytest.fixture()
def synthetic(tmp_path):
    """Two sources without videos: a_000..a_003 real (a_003 filtered out, a_004 dropped), b_000 movie."""
    write_source(tmp_path, "a", "r", {f"a_{i:03d}": "ok" for i in range(4)} | {"a_004": "dropped"}, keep={"a_003": 0})
    write_source(tmp_path, "b", "m", {"b_000": "ok"})
    write_tracks(
        tmp_path / "tracks" / "a.csv",
        [(f"a_{i:03d}", f, p, 10 * p, 10, 10 * p + 100, 200) for i in range(3) for p in (1, 2) for f in (10, 20, 30)],
    )
    write_tracks(tmp_path / "tracks" / "b.csv", [("b_000", f, 1, 5, 5, 300, 400) for f in (1, 2, 3)])
    return tmp_path


CASES = {  # label row -> expected problem (a regex)
    "a_000,r,1,99": r"unknown action id 99 \(not in the label map\)",
    "a_000,r,7,12": r"person 7 has no box in a_000",
    "a_003,r,1,12": r"clip not kept \(filter: few_persons\)",
    "a_004,r,1,12": r"clip not kept \(trim: dropped \(short final clip\)\)",
    "zz_000,r,1,12": r"unknown clip 'zz_000' \(in no manifest\)",
    "a_001,m,1,12": r"movie_or_real 'm' but the clip type is 'r'",
    "a_001,r,x,12": r"person_id 'x' is not a positive integer",
    "a_001,r,1,stand": r"action 'stand' is not an integer",
    "a_001,r,1": r"3 fields, expected 4",
}


def test_each_validation_case_is_reported(synthetic):
    good = ["a_000,r,1,12", "a_000,r,1,17", "a_000,r,2,79", "a_001,r,1,12", "a_002,r,2,80", "b_000,m,1,12"]
    six = [f"a_002,r,1,{a}" for a in (12, 17, 79, 80, 14, 11)]  # more than five actions
    lines = ["video_id,movie_or_real,person_id,action", *good, *CASES, *six, "a_000,r,1,12", "a_000,r,1,12"]
    (synthetic / "actions.csv").write_text("\n".join(lines) + "\n")
    out = synthetic / "out"
    summary = export.run(**inputs(synthetic), out_dir=out, actions=synthetic / "actions.csv")

    rep = pd.read_csv(out / "label_report.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert rep.columns.tolist() == ["line", "row", "problem"]
    by_row = dict(zip(rep["row"], rep["problem"]))
    for row, problem in CASES.items():
        assert re.search(problem, by_row[row]), (row, by_row.get(row))
    for row in six:
        assert "has 6 actions (more than 5)" in by_row[row]
    dup = rep[rep["problem"].str.startswith("exact duplicate")]
    assert dup["line"].tolist() == [str(len(lines) - 1), str(len(lines))]
    assert set(dup["problem"]) == {"exact duplicate of line 2; removed"}
    assert summary["duplicates"] == 2 and summary["label_problems"] == len(CASES) + len(six)

    rows = read_rows(out / "ava_format.csv")
    assert sorted((r[0], r[7], r[6]) for r in rows) == sorted(
        (g.split(",")[0], g.split(",")[2], g.split(",")[3]) for g in good
    )
    # every reported row and line is a real row of actions.csv (split warnings have none)
    labelled = rep[rep["line"] != ""]
    assert len(labelled) == len(rep) - len(summary["empty_splits"])
    for line, row in zip(labelled["line"].astype(int), labelled["row"]):
        assert lines[line - 1] == row


def test_template_mode_without_labels(synthetic):
    out = synthetic / "out"
    (out).mkdir()
    (out / "ava_train.csv").write_text("stale\n")  # left over from a run with labels
    summary = export.run(**inputs(synthetic), out_dir=out, actions=synthetic / "missing.csv")
    assert summary["labels"] is False
    assert not (out / "ava_train.csv").exists() and not (out / "label_report.tsv").exists()
    assert "missing.csv\t\tactions file not found; annotation template only" in (out / "input_report.tsv").read_text()
    assert (out / "boxes.csv").read_text().splitlines()[0] == "video_id,frame_stamp,xmin,ymin,xmax,ymax,person_id"
    template = (out / "annotation_template.csv").read_text().splitlines()
    assert template == [
        "video_id,movie_or_real,person_id,action",
        "a_000,r,1,",
        "a_000,r,2,",
        "a_001,r,1,",
        "a_001,r,2,",
        "a_002,r,1,",
        "a_002,r,2,",
        "b_000,m,1,",
    ]
    ids = {s: (out / "splits" / f"{s}_video_ids.txt").read_text().split() for s in ("train", "val", "test")}
    assert sorted(sum(ids.values(), [])) == ["a_000", "a_001", "a_002", "b_000"]  # the kept clips
    assert (
        out / "statistics" / "action_result_all.csv"
    ).read_bytes() == "\ufeffaction_id,action_name,count,ratio(%)\n".encode()
    assert (out / "statistics" / "person_count_all.csv").read_text(encoding="utf-8-sig").splitlines() == [
        "person_count,video_count,ratio(%)",
        "1,1,25.0",
        "2,3,75.0",
    ]


GOOD = ["a_000,r,1,12", "a_000,r,2,79", "a_001,r,1,12", "a_002,r,2,80", "b_000,m,1,12"]


def test_a_small_dataset_says_which_split_is_empty_and_writes_no_empty_split_file(synthetic, capsys):
    """4 kept clips at 7:1:2: val gets floor(0.4) = 0 clips. mmaction2's evaluation crashes on
    an empty ava_val_gt.csv, so it is not written, and the label report, the input report
    and the log (stderr) say why."""
    (synthetic / "actions.csv").write_text("video_id,movie_or_real,person_id,action\n" + "\n".join(GOOD) + "\n")
    out = synthetic / "out"
    out.mkdir()
    for stale in ("ava_val_gt.csv", "ava_val_predicted_boxes.csv"):
        (out / stale).write_text("a_000,41,0.1,0.1,0.5,0.5,12,1\n")  # from an earlier, larger run
    summary = export.run(**inputs(synthetic), out_dir=out, actions=synthetic / "actions.csv")
    assert summary["splits"] == {"train": 2, "val": 0, "test": 2} and summary["empty_splits"] == ["val"]
    assert not (out / "ava_val_gt.csv").exists() and not (out / "ava_val_predicted_boxes.csv").exists()
    for name in ("ava_train.csv", "ava_test_gt.csv", "ava_test_predicted_boxes.csv"):
        assert read_rows(out / name), name
    assert (out / "splits" / "val_video_ids.txt").read_text() == ""
    assert (out / "frame_lists" / "val.csv").read_text() == FRAME_LIST_HEADER + "\n"
    why = ("no clip: 4 clip(s) at ratios 0.7:0.1:0.2 give train 2, val 0, test 2 (train and val get the floor "
           "of their share); ava_val_gt.csv and ava_val_predicted_boxes.csv not written (an empty ground truth "
           "crashes mmaction2's evaluation); add clips, or change export.split.ratios")
    rep = pd.read_csv(out / "label_report.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert rep.values.tolist() == [["", "", f"split val: {why}"]]
    inp = pd.read_csv(out / "input_report.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert inp.values.tolist() == [["export.split", "val", why]]
    assert f"export: export.split: val: {why}" in capsys.readouterr().err


def test_one_labelled_clip_and_a_ratio_of_zero(synthetic):
    """Only labelled clips are in the splits: one clip goes to train (the greedy pass), val
    and test are empty and said so; a ratio of 0 asks for no split: no file, no warning."""
    (synthetic / "actions.csv").write_text("video_id,movie_or_real,person_id,action\na_000,r,1,12\n")
    out = synthetic / "out"
    summary = export.run(**inputs(synthetic), out_dir=out, actions=synthetic / "actions.csv")
    assert summary["splits"] == {"train": 1, "val": 0, "test": 0} and summary["empty_splits"] == ["test", "val"]
    assert read_rows(out / "ava_train.csv") == [["a_000", "20", "0.016", "0.021", "0.172", "0.417", "12", "1"]]
    assert sorted(p.name for p in out.glob("ava_*")) == ["ava_format.csv", "ava_format_with_header.csv",
                                                         "ava_train.csv", "ava_train_dense_proposals.pkl"]
    problems = pd.read_csv(out / "label_report.tsv", sep="\t", dtype=str, keep_default_na=False)["problem"]
    assert [p.split(":")[0] for p in problems] == ["split val", "split test"]
    summary = export.run(**inputs(synthetic), out_dir=out, actions=synthetic / "actions.csv", ratios=(1, 0, 0))
    assert summary["splits"] == {"train": 1, "val": 0, "test": 0} and summary["empty_splits"] == []
    assert sorted(p.name for p in out.glob("ava_*")) == ["ava_format.csv", "ava_format_with_header.csv",
                                                         "ava_train.csv", "ava_train_dense_proposals.pkl"]
    assert (out / "label_report.tsv").read_text() == "line\trow\tproblem\n"


def test_bad_inputs_reported_and_rest_goes_on(synthetic):
    (synthetic / "clips" / "c").mkdir(parents=True)
    (synthetic / "clips" / "c" / "manifest.tsv").write_text("garbage\n1\n")
    write_tracks(synthetic / "tracks" / "c.csv", [("a_003", 1, 1, 1, 1, 50, 50), ("a_000", "x", 1, 1, 1, 5, 5)])
    (synthetic / "tracks" / "d.csv").write_text("video_id,frame\nb_000,1\n")
    (synthetic / "frames").mkdir()
    (synthetic / "frames" / "a.tsv").write_text("clip_id\tframes\tstatus\treason\na_000\t0\tfailed\tffmpeg failed: x\n")
    out = synthetic / "out"
    export.run(**inputs(synthetic), out_dir=out, frames=[synthetic / "frames" / "a.tsv"])
    rep = pd.read_csv(out / "input_report.tsv", sep="\t", dtype=str, keep_default_na=False)
    text = "\n".join(rep["input"] + " | " + rep["item"] + " | " + rep["problem"])
    assert re.search(r"clips/c/manifest.tsv \|  \| unreadable manifest", text)
    assert re.search(
        r"tracks/c.csv \| a_003 \| 1 track row\(s\) of a clip that is not kept \(filter: few_persons\)", text
    )
    assert re.search(r"tracks/c.csv \|  \| 1 row\(s\) with a missing or non-numeric value", text)
    assert re.search(r"tracks/d.csv \|  \| missing column\(s\) frame_id", text)
    assert re.search(r"frames/a.tsv \| a_000 \| no frames for a clip in the \w+ split \(ffmpeg failed: x\)", text)
    assert len(read_rows(out / "boxes.csv")) == 1 + 7  # the good sources are still exported


# ---------------------------------------------------------------- round trip with real clips

# clip -> (footage, start, clip type); clips are scaled down to keep the test light
REAL = {"r": ("dancer", (260, 248)), "m": ("pianist", (320, 240))}
# (clip, person) -> (recorded frames, expected keyframe)
PERSONS = {
    ("srcR_000", 1): (list(range(1, 91, 5)), 41),  # 18 frames, median 43.5: tie 41/46 -> 41
    ("srcR_000", 2): ([10, 20, 90], 20),
    ("srcR_001", 1): ([3, 1, 2], 2),
    ("srcR_002", 1): (list(range(30, 61, 3)), 45),
    ("srcR_003", 1): ([50, 60], 50),
    ("srcM_000", 1): ([5, 85], 5),  # median 45: tie -> 5
    ("srcM_000", 2): ([40, 41, 42], 41),
    ("srcM_001", 1): ([7, 88, 89, 90], 88),
    ("srcM_002", 1): ([70, 71], 70),
    ("srcM_003", 1): ([33], 33),
    ("srcR_004", 1): ([12, 14, 16, 18], 14),  # median 15: tie -> 14
    ("srcM_004", 1): ([90, 1], 1),
}
ACTIONS = {  # (clip, person) -> action ids
    ("srcR_000", 1): [12, 17],
    ("srcR_000", 2): [79],
    ("srcR_001", 1): [12, 80],
    ("srcR_002", 1): [12],
    ("srcR_003", 1): [14, 12],
    ("srcM_000", 1): [11, 12],
    ("srcM_000", 2): [79, 74],
    ("srcM_001", 1): [12],
    ("srcM_002", 1): [12, 17],
    ("srcM_003", 1): [80],
    ("srcR_004", 1): [12],
    ("srcM_004", 1): [12],
}


def box_px(clip: str, person: int, f: int, size) -> tuple:
    w, h = size
    x0 = 5 * person + f  # varies with the frame so the keyframe is visible in the box
    return (x0 - 8, h * 0.1 + person, min(x0 + w * 0.5, w + 4), h - 3)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    for ctype, (name, size) in REAL.items():
        src = f"src{ctype.upper()}"
        clips = {f"{src}_{i:03d}": "ok" for i in range(6)} | {f"{src}_006": "dropped"}
        for i in range(5):
            make_clip(
                get_footage(name),
                root / "clips" / src / f"{src}_{i:03d}.mp4",
                start=3 * i,
                extra=("-vf", f"scale={size[0]}:{size[1]}"),
            )
        write_source(root, src, ctype, clips, keep={f"{src}_005": 0}, size=size)
        rows = []
        for (clip, person), (recorded, _) in PERSONS.items():
            if clip.startswith(src):
                rows += [(clip, f, person, *(round(v, 2) for v in box_px(clip, person, f, size))) for f in recorded]
        write_tracks(root / "tracks" / f"{src}.csv", rows)
    lines = ["video_id,movie_or_real,person_id,action"]
    for (clip, person), acts in ACTIONS.items():
        lines += [f"{clip},{clip[3].lower()},{person},{a}" for a in acts]
    lines += ["srcR_000,r,1,12", "srcR_005,r,1,12"]  # a duplicate, a clip not kept
    (root / "actions.csv").write_text("\n".join(lines) + "\n")
    out = root / "export"
    summary = export.run(**inputs(root), out_dir=out, actions=root / "actions.csv")
    for src in ("srcR", "srcM"):
        frames.run(root / "clips" / src / "manifest.tsv", root / "filter" / f"{src}.tsv", out / "frames")
    return root, out, summary


def test_round_trip_labels_and_boxes(real):
    root, out, summary = real
    assert summary["duplicates"] == 1 and summary["label_problems"] == 1
    header, *rows = read_rows(out / "ava_format_with_header.csv")
    assert header == export.AVA_HEADER.split(",")
    got_labels, got_boxes = set(), {}
    for r in rows:
        assert len(r) == 8
        assert re.fullmatch(r"[1-9]\d*", r[1]) and 1 <= int(r[1]) <= 90  # unpadded, 1-based
        assert all(re.fullmatch(r"(0|1)\.\d{1,3}", v) for v in r[2:6]), r
        box = tuple(float(v) for v in r[2:6])
        assert box[0] < box[2] and box[1] < box[3]
        got_labels.add((r[0], int(r[7]), int(r[6])))
        got_boxes.setdefault((r[0], int(r[7])), set()).add((int(r[1]), box))
    assert got_labels == {(c, p, a) for (c, p), acts in ACTIONS.items() for a in acts}
    for (clip, person), (_, kf) in PERSONS.items():
        ((stamp, box),) = got_boxes[(clip, person)]  # one box per person
        assert stamp == kf, (clip, person)
        size = REAL[clip[3].lower()][1]
        px = [round(v, 2) for v in box_px(clip, person, kf, size)]
        want = np.clip(np.array(px) / np.array([*size, *size]), 0, 1)
        assert np.abs(np.array(box) - want).max() <= 0.0005 + 1e-9, (clip, person, box, want)

    # the headerless files hold the same rows; the splits partition them
    assert read_rows(out / "ava_format.csv") == rows
    parts = {s: read_rows(out / f) for s, f in export.SPLIT_FILES.items()}
    assert sorted(sum(parts.values(), [])) == sorted(rows)
    for s, part in parts.items():
        assert all(len(r) == 8 and r[0] != "video_id" for r in part)
        ids = (out / "splits" / f"{s}_video_ids.txt").read_text().split()
        assert sorted({r[0] for r in part}) == ids
    for s in ("val", "test"):
        pred = read_rows(out / f"ava_{s}_predicted_boxes.csv")
        assert pred == [r[:6] + ["", "1"] for r in parts[s]]
    train_actions = {int(r[6]) for r in parts["train"]}
    assert train_actions == {a for acts in ACTIONS.values() for a in acts}

    assert (out / "label_map.pbtxt").read_bytes() == LABEL_MAP.read_bytes()
    assert len(slowfast_read_labelmap(out / "label_map.pbtxt")) == 50


def test_round_trip_frame_lists_point_at_frames(real):
    root, out, _ = real
    for s in ("train", "val", "test"):
        ids = (out / "splits" / f"{s}_video_ids.txt").read_text().split()
        with open(out / "frame_lists" / f"{s}.csv") as fh:
            header, *rows = [line.split(" ") for line in fh.read().splitlines()]
        assert header == ["original_video_id", "video_id", "frame_id", "path", "labels"]
        assert len(rows) == 90 * len(ids)
        for r in rows:
            assert r[0] == r[1] and r[4] == '""'
            assert (out / "frames" / r[3]).is_file(), r


def test_statistics_as_released(real):
    root, out, _ = real
    st = out / "statistics"
    for name in ("action_result", "label_type_result", "person_count"):
        for sub in ("all", "movie", "real"):
            assert (st / f"{name}_{sub}.csv").read_bytes().startswith(b"\xef\xbb\xbf"), name
    with open(st / "action_result_all.csv", encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["action_id", "action_name", "count", "ratio(%)"]
    counts = {int(r[0]): int(r[2]) for r in rows[1:]}
    want = pd.Series([a for acts in ACTIONS.values() for a in acts]).value_counts().to_dict()
    assert counts == want
    names = dict(zip(*labels.read_label_map(LABEL_MAP)[["id", "name"]].T.values))
    assert all(r[1] == names[int(r[0])] for r in rows[1:])
    total = sum(counts.values())
    assert all(float(r[3]) == round(int(r[2]) / total * 100, 2) for r in rows[1:])
    overall = (st / "overall_result.csv").read_text().splitlines()
    assert overall[:4] == ["type of amount,number", "all video,10", "movie,5", "real,5"]
    assert overall[4] == f"all action,{total}"
    split = pd.read_csv(st / "split_result.csv", encoding="utf-8-sig")
    assert split["video_count"].tolist() == [7, 1, 2, 10]
    for png in ("action_distribution.png", "persons_per_clip.png"):
        assert (st / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rerun_byte_identical(real, tmp_path):
    root, out, _ = real
    args = inputs(root)
    args = {k: (list(reversed(v)) if isinstance(v, list) else v) for k, v in args.items()}  # other order
    export.run(**args, out_dir=tmp_path / "again", actions=root / "actions.csv")
    first = {k: v for k, v in tree_bytes(out).items() if not k.startswith("frames/")}
    assert tree_bytes(tmp_path / "again") == first


# ---------------------------------------------------------------- mmaction2 mapping

# mmaction2 AVADataset settings under which frame stamp n picks <clip>/<clip>_{n:06d}.jpg and
# every sampled index stays inside 1..90. mmaction2 computes the centre as
# fps * (stamp - timestamp_start) + start_index, clips the window to
# [0, (timestamp_end - timestamp_start) * fps - 1], then adds start_index again
# (transforms/loading.py SampleAVAFrames; 0.x adds 1 instead of the first start_index):
# (n - 2) + 1 + 1 = n, window within [1, 90]. Tested in tests/test_export.py.
MMACTION_SETTINGS = dict(fps=1, timestamp_start=2, timestamp_end=2 + CLIP_FRAMES, start_index=1)  # docs/mmaction2/


def mmaction_frame_files(
    row,
    frames_root: Path,
    *,
    fps,
    timestamp_start,
    timestamp_end,
    start_index,
    clip_len=32,
    frame_interval=2,
    version="1.x",
):
    """The frame files mmaction2's AVADataset + SampleAVAFrames(test_mode=True) + RawFrameDecode
    read for one annotation row, re-implemented from the source:

    * ``mmaction/datasets/ava_dataset.py`` ``load_data_list``: ``timestamp = int(line_split[1])``,
      ``shot_info = (0, (timestamp_end - timestamp_start) * fps)``, ``frame_dir = data_prefix/video_id``.
    * ``mmaction/datasets/transforms/loading.py`` ``SampleAVAFrames``: 1.x:
      ``center_index = fps * (timestamp - timestamp_start) + start_index``; 0.x:
      ``... + 1``; ``_get_clips``: ``range(center - (clip_len // 2) * frame_interval,
      center + ((clip_len + 1) // 2) * frame_interval, frame_interval)`` clipped to
      ``[shot_info[0], shot_info[1] - 1]``; then ``frame_inds + start_index``.
    * ``RawFrameDecode``: ``osp.join(frame_dir, filename_tmpl.format(frame_idx))`` with
      mmaction2's default template ``img_{:05}.jpg`` (the frames stage links those names).
    Returns (the centre frame's file, all files).
    """
    video_id, timestamp = row[0], int(row[1])
    shot_info = (0, (timestamp_end - timestamp_start) * fps)
    center = fps * (timestamp - timestamp_start) + (start_index if version == "1.x" else 1)
    inds = np.arange(
        center - (clip_len // 2) * frame_interval, center + ((clip_len + 1) // 2) * frame_interval, frame_interval
    )
    inds = np.clip(inds, shot_info[0], shot_info[1] - 1) + start_index
    tmpl = frames.MMACTION2_TMPL
    paths = [frames_root / video_id / tmpl.format(int(i)) for i in inds]
    return paths[clip_len // 2], paths


@pytest.mark.parametrize("version", ["1.x", "0.x"])
def test_mmaction2_settings_pick_the_keyframe_jpeg(real, version):
    root, out, _ = real
    rows = sum((read_rows(out / f) for f in export.SPLIT_FILES.values()), [])
    assert rows
    for r in rows:
        center, paths = mmaction_frame_files(r, out / "frames", **MMACTION_SETTINGS, version=version)
        assert center.resolve() == out / "frames" / frame_path(r[0], int(r[1])), r
        assert all(p.is_file() for p in paths), r  # the whole window stays inside frames 1..90


def test_mmaction2_default_settings_would_not(real):
    """The mapping matters: AVA's defaults, or fps=1 without the offsets, read other files."""
    root, out, _ = real
    rows = read_rows(out / "ava_format.csv")
    defaults = dict(fps=30, timestamp_start=900, timestamp_end=1800, start_index=0)
    assert any(
        mmaction_frame_files(r, out / "frames", **defaults)[0] != out / "frames" / r[0] / frames.MMACTION2_TMPL.format(int(r[1]))
        for r in rows
    )
    naive = dict(fps=1, timestamp_start=0, timestamp_end=90, start_index=0)
    assert any(not all(p.is_file() for p in mmaction_frame_files(r, out / "frames", **naive)[1]) for r in rows)


# ---------------------------------------------------------------- the training tools' own loaders


@pytest.fixture(scope="module")
def mm_workdir(real, tmp_path_factory):
    """A folder laid out as the shipped mmaction2 config expects: results/export, with the
    frames in results/export/frames."""
    root, out, _ = real
    wd = tmp_path_factory.mktemp("mmaction2")
    (wd / "results").mkdir()
    (wd / "results" / "export").symlink_to(out)
    return wd


def track_rows(root: Path) -> pd.DataFrame:
    return pd.concat(pd.read_csv(p, dtype={"video_id": str}) for p in sorted(root.glob("tracks/*.csv")))


def test_proposals_are_every_tracked_box_at_each_keyframe(real):
    root, out, _ = real
    tracks = track_rows(root)
    sizes = {c: s for ctype, (_, s) in REAL.items() for c in tracks.video_id if c[3].lower() == ctype}
    for split, name in export.SPLIT_FILES.items():
        rows = read_rows(out / name)
        props = loaders.load_proposals(out, split)
        assert set(props) == {f"{r[0]},{int(r[1]):04d}" for r in rows}, split
        for r in rows:
            arr = props[f"{r[0]},{int(r[1]):04d}"]
            assert arr.dtype == np.float32 and arr.ndim == 2 and arr.shape[1] == 5
            at = tracks[(tracks.video_id == r[0]) & (tracks.frame_id == int(r[1]))].sort_values("person_id")
            w, h = sizes[r[0]]
            want = np.round(np.clip(at[["xmin", "ymin", "xmax", "ymax"]].to_numpy() / [w, h, w, h], 0, 1), 3)
            assert np.allclose(arr[:, :4], want, atol=1e-6) and np.allclose(arr[:, 4], at.conf, atol=1e-6)
            assert any(np.allclose(p[:4], [float(v) for v in r[2:6]], atol=1e-6) for p in arr)  # its own box


def test_mmaction2_avadataset_loads_every_split(real, mm_workdir, monkeypatch):
    """The shipped config, mmaction2's AVADataset and transforms: every record of every split
    reads existing frames, the window's centre is the keyframe, labels and proposals come through."""
    root, out, _ = real
    monkeypatch.chdir(mm_workdir)  # the config's paths are relative to the folder holding results/
    datasets = loaders.mmaction2_datasets(mm_workdir)
    assert sorted(datasets) == ["test", "train", "val"]  # the fixture's 10 clips fill every split
    ids = sorted(labels.read_label_map(LABEL_MAP)["id"])
    for ds, _ in datasets.values():  # the config's settings are the documented ones
        assert {k: getattr(ds, k) for k in ("timestamp_start", "timestamp_end", "start_index")} | {
            "fps": ds._FPS
        } == MMACTION_SETTINGS
        assert ds.custom_classes == [0, *ids] and ds.filename_tmpl == frames.MMACTION2_TMPL
    decoded = {}
    for split, (ds, pipeline) in datasets.items():
        rows = read_rows(out / export.SPLIT_FILES[split])
        want = {}
        for r in rows:
            want.setdefault(f"{r[0]},{int(r[1]):04d}", set()).add(int(r[6]))
        assert sorted(ds.get_data_info(i)["img_key"] for i in range(len(ds))) == sorted(want)
        for i in range(len(ds)):
            got = loaders.mmaction2_sample(ds, pipeline, i, mm_workdir)
            info = got["info"]
            clip, stamp = info["video_id"], info["timestamp"]
            assert all(f.is_file() for f in got["files"]), (split, clip, stamp)
            centre = got["files"][got["centre"]].resolve()
            assert centre == (out / "frames" / frame_path(clip, stamp)).resolve(), (clip, stamp)
            classes = {ids[k - 1] for k in np.nonzero(info["gt_labels"].max(axis=0))[0]}
            assert classes == want[info["img_key"]]  # custom_classes: AVA id -> 1..50
            assert info["proposals"].shape[1] == 4 and len(info["proposals"]) >= 1
            if i < 2:  # the image mmaction2 decoded is frame `stamp` of the clip itself
                src = clip.rsplit("_", 1)[0]
                if clip not in decoded:
                    decoded[clip] = list(media.read_frames(root / "clips" / src / f"{clip}.mp4"))
                diffs = loaders.decoded_frame_diffs(got["imgs"][got["centre"]], decoded[clip])
                assert diffs[stamp - 1] < 3.0 and diffs[stamp - 1] - diffs.min() < 0.05, (clip, stamp, diffs.argmin())
        sample = ds[0]  # the config's whole pipeline for this split
        assert tuple(sample["inputs"].shape[:2]) == (3, 32), split
        assert len(sample["data_samples"].gt_instances.bboxes) >= 1


def test_pyslowfast_reference_parser_loads_every_split(real):
    root, out, _ = real
    id_map = loaders.reference_build_id_map(out / "label_map.pbtxt")
    for split, name in export.SPLIT_FILES.items():
        rows = read_rows(out / name)
        got = loaders.pyslowfast_split(out, out / "frames", split)
        assert set(got) == {(r[0], int(r[1])) for r in rows}, split
        for (clip, stamp), (centre, n_boxes, labs) in got.items():
            # the reference reads frame stamp n at index n of the 0-based frame list: frame n + 1
            assert centre == str(out / "frames" / frame_path(clip, min(stamp + 1, 90)))
            mine = [r for r in rows if (r[0], int(r[1])) == (clip, stamp)]
            assert n_boxes == len({tuple(r[2:6]) for r in mine})
            if split == "train":
                assert labs == sorted(id_map[int(r[6])] for r in mine)
