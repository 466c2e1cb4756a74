"""CVAT for video 1.1 and MOT files out, CVAT corrections in (pure logic and files; the
workflow's re-run is in test_reruns.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pandas as pd
import pytest

from microg4m.stages import corrections, track_files as trackfiles
from microg4m.formats import cvat, manifest
from microg4m.formats.tracks import COLUMNS as TRACK_COLUMNS

HEADER = "video_id,frame_id,person_id,xmin,ymin,xmax,ymax,conf\n"


def held(refreshes: dict[int, tuple], end: int) -> dict[int, tuple]:
    """The reference's hold: each refresh's box until the frame before the next one."""
    frames = sorted(refreshes) + [end + 1]
    return {f: refreshes[a] for a, b in zip(frames, frames[1:]) for f in range(a, b)}


# person 1: refreshed every 5 frames from 11, held, to the end; person 2: frames 20..44, then
# gone, back on 61..70 (a gap), not to the end of the clip
P1 = held({f: (100 + f, 50.0, 200 + f, 300.0 + f / 2) for f in range(11, 91, 5)}, 90)
P2 = held({20: (10, 10, 60, 90), 25: (12, 11, 62, 92), 30: (15, 11, 65, 95), 35: (15, 11, 65, 95),
           40: (20, 12, 70, 99)}, 44) | held({61: (300, 20, 380, 200), 66: (302, 21, 381, 201)}, 70)


def rows_of(persons: dict[int, dict]) -> list[tuple]:
    return [(f, p, *b) for p, boxes in persons.items() for f, b in boxes.items()]


def write(tmp_path, persons, name="c_000", frames=90, size=(640, 480)) -> object:
    path = tmp_path / f"{name}.xml"
    cvat.write_clip(path, name, rows_of(persons), frames=frames, width=size[0], height=size[1])
    return path


def test_keyframes_hold_refresh_and_hold_end():
    boxes = np.array([P1[f] for f in sorted(P1)])
    keys = [sorted(P1)[i] for i in cvat.keyframe_indices(boxes)]
    refreshes = list(range(11, 91, 5))
    assert keys == sorted(set(refreshes) | {r + 4 for r in refreshes if r + 4 <= 90} | {90})
    lin = np.array([np.array(P1[11]) + (f - 11) * np.array([1, 0, 1, 0.5]) for f in range(11, 91)])
    assert [11 + i for i in cvat.keyframe_indices(np.round(lin, 2))] == [11, 90]  # one straight line


def test_xml_as_cvat_writes_it_and_reads_back_exactly(tmp_path):
    path = write(tmp_path, {1: P1, 2: P2})
    root = ET.parse(path).getroot()
    assert root.findtext("version") == "1.1"
    task = root.find("meta/task")
    assert [task.findtext(k) for k in ("name", "size", "mode", "start_frame", "stop_frame", "source")] == [
        "c_000", "90", "interpolation", "0", "89", "c_000.mp4"]
    assert task.findtext("original_size/width") == "640" and task.findtext("labels/label/name") == "person"
    t1, t2 = root.findall("track")
    b1 = t1.findall("box")
    assert [int(b.get("frame")) for b in b1] == list(range(10, 90))  # 0-based; every frame written
    assert b1[0].get("keyframe") == "1" and b1[1].get("keyframe") == "0"
    assert {b.find("attribute").text for b in b1} == {"1"}
    for b in b1[:3]:
        b.find("attribute").text = "1.0"  # how CVAT writes back a number attribute it parsed
    ET.ElementTree(root).write(path)
    b2 = t2.findall("box")
    outside = [int(b.get("frame")) for b in b2 if b.get("outside") == "1"]
    assert outside == [44, 70]  # after frame 44 and after frame 70 (1-based)
    back = cvat.read(path)
    assert back.clip_id == "c_000" and (back.size, back.width, back.height) == (90, 640, 480)
    got = dict(back.tracks)
    assert set(got) == {1, 2}
    for pid, want in ((1, P1), (2, P2)):
        assert set(got[pid]) == set(want)
        assert max(np.abs(np.array(got[pid][f]) - want[f]).max() for f in want) < 1e-9


def test_read_follows_cvat_import_keyframes_only_and_gaps(tmp_path):
    """Only keyframes count (the values between are CVAT's own), and a missing frame ends a stretch."""
    path = write(tmp_path, {1: P1})
    root = ET.parse(path).getroot()
    track = root.find("track")
    for b in track.findall("box"):
        if b.get("keyframe") == "0":
            b.set("xtl", "0.00")  # stale in-between values are ignored, as CVAT ignores them
        if b.get("frame") == "50":  # and a frame missing from the file ends the stretch there
            track.remove(b)
    ET.ElementTree(root).write(path)
    got = dict(cvat.read(path).tracks)[1]
    assert sorted(got) == [*range(11, 51), *range(52, 91)]  # frame 51 (CVAT's 50) is a hole
    assert max(np.abs(np.array(got[f]) - P1[f]).max() for f in got if f <= 50) < 1e-9
    assert got[52][0] == 0.0  # the first box after a gap starts a stretch as it is, like CVAT


FOREIGN = {
    "not xml": (b"<annotations><version>1.1", r"not XML"),
    "other root": (b"<?xml version='1.0'?><annotation><object/></annotation>", r"root element <annotation>"),
    "images": (b"<annotations><version>1.1</version><meta><task><name>c_000</name><size>90</size>"
               b"<mode>annotation</mode></task></meta><image id='0' name='a.jpg'/></annotations>",
               r"'CVAT for images' file"),
    "job": (b"<annotations><version>1.1</version><meta><job><size>90</size></job></meta></annotations>",
            r"a job export"),
}


@pytest.mark.parametrize("case", sorted(FOREIGN))
def test_foreign_files_are_named_with_the_reason(tmp_path, case):
    data, reason = FOREIGN[case]
    path = tmp_path / "x.xml"
    path.write_bytes(data)
    with pytest.raises(cvat.CvatError, match=rf"^{tmp_path}/x.xml: .*{reason}"):
        cvat.read(path)


@pytest.mark.parametrize("edit, reason", [
    (lambda t: t.set("label", "face"), r"track 0 has label 'face'"),
    (lambda t: ET.SubElement(t, "polygon", {"frame": "3"}), r"holds a <polygon>"),
    (lambda t: t.find("box").set("frame", "90"), r"frame 90 outside the task \(0..89\)"),
    (lambda t: t.find("box").set("xtl", "wide"), r"box without numeric"),
    (lambda t: t.find("box").set("xbr", "1.00"), r"empty box"),
])
def test_broken_tracks_are_named_with_the_reason(tmp_path, edit, reason):
    path = write(tmp_path, {1: P1})
    root = ET.parse(path).getroot()
    edit(root.find("track"))
    ET.ElementTree(root).write(path)
    with pytest.raises(cvat.CvatError, match=rf"c_000.xml: .*{reason}"):
        cvat.read(path)


def test_mot_text():
    df = pd.DataFrame([("c_000", 2, 1, 10.0, 20.0, 110.5, 220.0, 0.9), ("c_000", 1, 2, 1, 2, 3, 4, 0.55)],
                      columns=TRACK_COLUMNS)
    assert trackfiles.mot_text(df) == "1,2,1.00,2.00,2.00,2.00,0.5500,-1,-1,-1\n" \
                                      "2,1,10.00,20.00,100.50,200.00,0.9000,-1,-1,-1\n"


# ---------------------------------------------------------------- corrections


@pytest.fixture()
def unit(tmp_path):
    """One source 'c' with clips c_000 (2 persons), c_001 (1 person), c_002 (filtered out)."""
    rows = [dict(clip_id=f"c_{i:03d}", source_id="c", clip_type="r", seq=i, start_s=3 * i, frames=90,
                 width=640, height=480, status="ok", reason="") for i in range(3)]
    manifest.write_manifest(tmp_path / "clips" / "c" / "manifest.tsv", rows)
    (tmp_path / "filter.tsv").write_text("clip_id\tperson_share\tcuts\tkeep\treason\n"
                                         "c_000\t1\t\t1\tkept\nc_001\t1\t\t1\tkept\nc_002\t0\t\t0\tfew_persons\n")
    lines = [f"c_000,{f},{p},{b[0]:.2f},{b[1]:.2f},{b[2]:.2f},{b[3]:.2f},0.8{p}00"
             for f, p, *b in sorted(rows_of({1: P1, 2: P2}))]
    lines += [f"c_001,{f},1,{b[0]:.2f},{b[1]:.2f},{b[2]:.2f},{b[3]:.2f},0.7000" for f, _, *b in rows_of({1: P2})]
    (tmp_path / "tracks.csv").write_text(HEADER + "".join(sorted(line + "\n" for line in lines)))
    return tmp_path


def apply(unit, *files):
    rep = corrections.run(unit / "tracks.csv", unit / "clips" / "c" / "manifest.tsv", unit / "filter.tsv",
                          files, unit / "out.csv", unit / "out.tsv")
    return rep, pd.read_csv(unit / "out.csv", dtype={"video_id": str})


def test_no_correction_is_a_byte_copy(unit):
    rep, _ = apply(unit)
    assert rep.empty and (unit / "out.csv").read_bytes() == (unit / "tracks.csv").read_bytes()


def test_a_correction_moves_deletes_adds_and_keeps_the_rest(unit):
    path = write(unit, {1: P1, 2: P2})
    root = ET.parse(path).getroot()
    t1, t2 = root.findall("track")
    root.remove(t2)  # delete person 2
    moved = [b for b in t1.findall("box") if b.get("frame") == "45"][0]  # frame 46, a refresh
    moved.set("xtl", "99.00")
    new = ET.SubElement(root, "track", {"id": "7", "label": "person"})  # drawn on frame 4, ended on 8
    for frame, outside, key in ((4, "0", "1"), (5, "0", "0"), (6, "0", "0"), (7, "0", "0"), (8, "1", "1")):
        b = ET.SubElement(new, "box", {"frame": str(frame), "outside": outside, "occluded": "0", "keyframe": key,
                                       "xtl": "5", "ytl": "6", "xbr": "50", "ybr": "60", "z_order": "0"})
        ET.SubElement(b, "attribute", {"name": "person_id"}).text = "0"
    ET.ElementTree(root).write(path)
    rep, out = apply(unit, path)
    assert rep[["clip_id", "status", "persons_before", "persons_after"]].values.tolist() == [
        ["c_000", "applied", 2, 2]]
    c0 = out[out.video_id == "c_000"]
    assert sorted(c0.person_id.unique()) == [1, 3]  # 2 was deleted; the new person never reuses it
    new_rows = c0[c0.person_id == 3]
    assert new_rows.frame_id.tolist() == [5, 6, 7, 8] and set(new_rows.conf) == {1.0}
    p1 = c0[c0.person_id == 1].set_index("frame_id")
    assert p1.at[46, "xmin"] == 99.0 and p1.at[46, "conf"] == 1.0
    # frames 47..49 lie between the moved keyframe and the next one (50, where 46's box is held
    # to): CVAT slides them from one to the other, as the person saw it there
    assert p1.loc[47:49, "xmin"].tolist() == [99 + (P1[50][0] - 99) * k / 4 for k in (1, 2, 3)]
    assert p1.at[45, "xmin"] == P1[45][0] and p1.at[50, "xmin"] == P1[50][0]
    unchanged = p1.drop(index=[46, 47, 48, 49])
    assert (unchanged.conf == 0.81).all() and (p1.loc[46:49, "conf"] == 1.0).all()  # tracker's conf kept
    before = (unit / "tracks.csv").read_text().splitlines()
    after = (unit / "out.csv").read_text().splitlines()
    assert [x for x in after if x.startswith("c_001")] == [x for x in before if x.startswith("c_001")]


def test_unusable_corrections_are_reported_and_change_nothing(unit, tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<annotations><oops")
    (tmp_path / "o").mkdir()
    other = write(tmp_path / "o", {1: P1}, name="c_002")  # a clip the filter rejected
    small = write(tmp_path, {1: P1}, name="c_001", size=(320, 240))  # another video's size
    dup = write(unit, {1: P1, 2: P2})
    root = ET.parse(dup).getroot()
    for b in root.findall("track")[1].iter("attribute"):
        b.text = "1"  # two tracks claim person 1 on the same frames
    ET.ElementTree(root).write(dup)
    rep, _ = apply(unit, bad, other, small, dup)
    reasons = dict(zip(rep["file"], rep["reason"]))
    assert set(rep["status"]) == {"failed"}
    assert "not XML" in reasons[str(bad)]
    assert "c_002 is not kept by the filter" in reasons[str(other)]
    assert "frames are 320x240, clip c_001's are 640x480" in reasons[str(small)]
    assert "two tracks have person_id 1 on frame(s) 20, 21" in reasons[str(dup)]
    assert (unit / "out.csv").read_bytes() == (unit / "tracks.csv").read_bytes()


def test_index_maps_files_to_clips_and_reports_the_rest(tmp_path):
    folder = tmp_path / "corrections"
    folder.mkdir()
    write(folder, {1: P1}, name="a_000")
    zpath = folder / "task_a_001-cvat for video 1.1.zip"  # as CVAT's export gives it
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("annotations.xml", cvat.clip_xml("a_001", rows_of({1: P1}), frames=90, width=640, height=480))
    (folder / "twice.xml").write_bytes((folder / "a_000.xml").read_bytes())
    write(folder, {1: P1}, name="zz_000")
    (folder / "notes.txt").write_text("ignored: not .xml/.zip")
    (folder / "broken.xml").write_text("<annotations>")
    chosen, problems = corrections.index(folder, {"a"})
    assert chosen == {"a_001": str(zpath)}
    got = {p[0].split("/")[-1]: p[2] for p in problems}
    assert set(got) == {"a_000.xml", "twice.xml", "zz_000.xml", "broken.xml"}
    assert "2 correction files for a_000 (a_000.xml, twice.xml); none used" in got["twice.xml"]
    assert "clip 'zz_000' is of no source" in got["zz_000.xml"] and "not XML" in got["broken.xml"]
    assert dict(cvat.read(zpath).tracks)[1][11] == P1[11]
