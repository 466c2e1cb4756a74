"""Tracking: boxmot BoT-SORT on a real YOLO detection cache of real footage.

One source with five 90-frame clips is built once per session (real footage, real
weights, ``microg4m.detect``); each test writes its own filter decisions and runs
``track.run``. The record rules are also unit-tested on synthetic tracker outputs.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
import pytest

from conftest import ffmpeg, get_footage, make_clip
from microg4m import detect, manifest as mf, media, motion, track
from microg4m.track import Adapt, Box

LOW = Adapt(5, 3, 0.10)
HIGH = Adapt(3, 2, 0.20)
X264 = ("-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p")


def encode(frames, out, fps=30):
    """Encode BGR frames as an H.264 clip."""
    h, w = frames[0].shape[:2]
    cmd = [media.ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "bgr24",
           "-s", f"{w}x{h}", "-r", str(fps), "-i", "-", *X264, str(out)]
    subprocess.run(cmd, input=b"".join(f.tobytes() for f in frames), check=True)


@pytest.fixture(scope="session")
def source(tmp_path_factory, weights):
    """clips/t/: t_000 dancer, t_001 two men (zidane, padded), t_002 close-up (zidane crop),
    t_003 two men on frames 1-8 then grey, t_004 camera pan over bus.jpg (people move)."""
    root = tmp_path_factory.mktemp("track")
    clips = root / "clips" / "t"
    clips.mkdir(parents=True)
    zidane, bus = get_footage("zidane"), get_footage("bus")
    make_clip(get_footage("dancer"), clips / "t_000.mp4")
    still = ("-loop", "1", "-i", str(zidane), "-t", "3", "-r", "30")
    ffmpeg(*still, "-vf", "scale=640:360,pad=960:540:160:90", *X264, str(clips / "t_001.mp4"))
    ffmpeg(*still, "-vf", "crop=940:570:120:150,scale=470:286", *X264, str(clips / "t_002.mp4"))
    frames = media.read_frames(clips / "t_001.mp4")
    encode(frames[:8] + [np.full_like(frames[0], 128)] * 82, clips / "t_003.mp4")
    ffmpeg("-loop", "1", "-i", str(bus), "-t", "3", "-r", "30",
           "-vf", "crop=400:400:'t*120':300", *X264, str(clips / "t_004.mp4"))
    rows = []
    for i in range(5):
        cid = mf.clip_id("t", i)
        info = media.probe(clips / f"{cid}.mp4")
        assert media.count_frames(clips / f"{cid}.mp4") == 90
        rows.append(dict(clip_id=cid, source_id="t", clip_type="r", seq=i, start_s=3 * i, frames=90,
                         width=info.width, height=info.height, status="ok", reason=""))
    manifest = clips / "manifest.tsv"
    mf.write_manifest(manifest, rows)
    detect.run(manifest, root / "detections.parquet", weights=str(weights), imgsz=320, device="cpu")
    motion.run(manifest, root / "motion.tsv")
    return root


def run_track(source, tmp_path, clips, name="tracks.csv", motion_rows=None, **settings):
    """Keep only ``clips`` and track them; returns the tracks table as read back."""
    decisions = tmp_path / "filter.tsv"
    pd.DataFrame({"clip_id": clips, "person_share": "1.0000", "cuts": "", "keep": "1",
                  "reason": "kept"}).to_csv(decisions, sep="\t", index=False)
    mot = source / "motion.tsv"
    if motion_rows:
        mot = tmp_path / "motion.tsv"
        pd.DataFrame([(c, "0", "0", lv) for c, lv in motion_rows.items()],
                     columns=motion.COLUMNS).to_csv(mot, sep="\t", index=False)
    out = tmp_path / name
    track.run(source / "clips/t/manifest.tsv", source / "detections.parquet", decisions, mot, out,
              **settings)
    return pd.read_csv(out, dtype={"video_id": str})


# ---------------------------------------------------------------- real footage


def test_motion_levels_of_the_source(source):
    levels = motion.read_motion(source / "motion.tsv")
    assert levels == {"t_000": "low", "t_001": "low", "t_002": "low", "t_003": "low", "t_004": "high"}


def test_one_moving_person_keeps_one_id(source, tmp_path):
    df = run_track(source, tmp_path, ["t_000"])
    assert len(df) >= 60  # one dancer, recorded from the 3rd refresh (frame 11) on
    top = df["person_id"].value_counts()
    assert top.index[0] == 1 and top.iloc[0] / df["frame_id"].nunique() >= 0.9
    assert list(df.columns) == track.COLUMNS and (df["video_id"] == "t_000").all()


def test_two_people_two_ids_and_format(source, tmp_path):
    df = run_track(source, tmp_path, ["t_001"])
    assert sorted(df["person_id"].unique()) == [1, 2]
    # low motion: refresh every 5 frames, 3rd sighting on frame 11, then every frame
    for pid in (1, 2):
        assert list(df[df.person_id == pid]["frame_id"]) == list(range(11, 91))
    assert (df[["xmin", "ymin"]].to_numpy() >= 0).all()
    assert (df["xmax"] <= 960).all() and (df["ymax"] <= 540).all()
    assert ((df["xmax"] - df["xmin"]) * (df["ymax"] - df["ymin"]) >= 0.10 * 960 * 540).all()
    text = (tmp_path / "tracks.csv").read_text()
    assert text.startswith(",".join(track.COLUMNS) + "\n")
    assert text.splitlines()[1].split(",")[3].count(".") == 1
    assert len(text.splitlines()[1].split(",")[3].split(".")[1]) == 2  # 2 decimals
    assert df.equals(df.sort_values(["video_id", "frame_id", "person_id"]))


def test_closeup_records_only_the_largest_person(source, tmp_path):
    df = run_track(source, tmp_path, ["t_002"])
    assert list(df["person_id"].unique()) == [1]
    area = ((df["xmax"] - df["xmin"]) * (df["ymax"] - df["ymin"])) / (470 * 286)
    assert (area > 0.5).all()
    # the man at the right edge is big enough to be recorded without the rule
    off = run_track(source, tmp_path, ["t_002"], name="off.csv", closeup_area=1.0)
    assert sorted(off["person_id"].unique()) == [1, 2]


def test_too_few_refreshes_no_box(source, tmp_path):
    # two men on frames 1-8 only: seen on the refreshes at frames 1 and 6
    df = run_track(source, tmp_path, ["t_003"], motion_rows={"t_003": "low"})
    assert df.empty
    two = run_track(source, tmp_path, ["t_003"], name="two.csv", motion_rows={"t_003": "low"},
                    low_motion={"interval": 5, "min_detections": 2, "min_area": 0.1})
    assert sorted(two["frame_id"].unique()) == [6, 7, 8, 9, 10]  # held until the next refresh
    assert sorted(two["person_id"].unique()) == [1, 2]


def test_hold_and_interpolate(source, tmp_path):
    hold = run_track(source, tmp_path, ["t_004"], name="hold.csv")
    interp = run_track(source, tmp_path, ["t_004"], name="interp.csv", box_mode="interpolate")
    key = ["video_id", "frame_id", "person_id"]
    assert hold[key].equals(interp[key])  # same frames and persons
    cols = ["xmin", "ymin", "xmax", "ymax"]
    refresh = hold["frame_id"].isin(track.refresh_frames(90, HIGH.interval))  # high motion
    np.testing.assert_array_equal(hold.loc[refresh, cols], interp.loc[refresh, cols])
    diff = (hold.loc[~refresh, cols].to_numpy() - interp.loc[~refresh, cols].to_numpy())
    assert np.abs(diff).max() > 3  # the camera pans 4 px per frame
    # hold repeats the refreshed box
    for pid, g in hold.groupby("person_id"):
        g = g.set_index("frame_id")
        for f in g.index:
            r = f - (f - 1) % HIGH.interval
            if r in g.index:
                assert (g.loc[f, cols] == g.loc[r, cols]).all()


def test_previews_and_byte_identical_reruns(source, tmp_path):
    clips = ["t_000", "t_001", "t_004"]
    outs = []
    for k in range(2):
        d = tmp_path / str(k)
        d.mkdir()
        run_track(source, d, clips, contact_sheet=d / "sheet.png",
                  previews_dir=d / "previews" if k == 0 else None)
        outs.append(d)
    for name in ("tracks.csv", "sheet.png"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    for c in clips:
        p = outs[0] / "previews" / f"{c}.mp4"
        assert media.count_frames(p) == 90
    assert not list(outs[0].glob("**/.*"))  # no temporary files left


def test_no_kept_clips(source, tmp_path):
    df = run_track(source, tmp_path, [], contact_sheet=tmp_path / "sheet.png")
    assert df.empty and (tmp_path / "tracks.csv").read_text() == ",".join(track.COLUMNS) + "\n"
    assert (tmp_path / "sheet.png").stat().st_size > 0


def test_missing_motion_level_is_an_error(source, tmp_path):
    with pytest.raises(ValueError, match="no motion level for kept clip t_001"):
        run_track(source, tmp_path, ["t_001"], motion_rows={"t_000": "low"})


def test_unknown_botsort_setting(source, tmp_path):
    with pytest.raises(ValueError, match="unknown settings.*'track_hi'"):
        run_track(source, tmp_path, ["t_001"], botsort={"track_hi": 0.5})


# ---------------------------------------------------------------- pure record rules


def out(*rows):
    """Tracker rows x1, y1, x2, y2, id, conf, cls, det_ind."""
    return np.array([[*r[:4], r[4], r[5], 0, i] for i, r in enumerate(rows)], dtype=float)


def test_refresh_frames():
    assert track.refresh_frames(90, 5)[:3] == [1, 6, 11] and track.refresh_frames(90, 5)[-1] == 86
    assert track.refresh_frames(90, 3)[-1] == 88 and len(track.refresh_frames(90, 1)) == 90


def test_rules_on_synthetic_outputs():
    W, H = 100, 100
    kw = dict(width=W, height=H, adapt=LOW, record_conf=0.55, closeup_area=0.5)
    seen = {}
    a = (0, 0, 40, 40)  # area 0.16
    small = (60, 60, 65, 65)  # area 0.0025: counted but never recorded
    for _ in range(2):
        assert track.select_refresh(out((*a, 7, 0.9), (*small, 3, 0.9)), seen, **kw) == {}
    sel = track.select_refresh(out((*a, 7, 0.9), (*small, 3, 0.9), (*a, 4, 0.5)), seen, **kw)
    assert list(sel) == [7] and seen == {7: 3, 3: 3}  # conf 0.5 is not a sighting
    # close-up: the largest confident person covers > 50 %: only it
    big = (0, 0, 80, 80)
    seen = {1: 5, 2: 5}
    assert list(track.select_refresh(out((*big, 1, 0.9), (*a, 2, 0.9)), seen, **kw)) == [1]
    assert list(track.select_refresh(out((*big, 1, 0.9), (*a, 2, 0.9)), seen,
                                     **{**kw, "closeup_area": 1.0})) == [1, 2]
    # boxes are clipped to the frame before the area test
    seen = {9: 5}
    sel = track.select_refresh(out((-50, -50, 20, 20, 9, 0.9)), seen, **kw)
    assert sel == {}


def test_person_ids_by_first_recorded_frame():
    b = Box(0, 0, 10, 10, 0.9)
    recorded = {1: {8: b}, 6: {3: b, 8: b}, 11: {5: b}}
    assert track.person_ids(recorded) == {8: 1, 3: 2, 5: 3}


def test_hold_and_interpolate_synthetic():
    r1, r2 = Box(0, 0, 10, 10, 0.9), Box(10, 20, 30, 40, 0.8)
    recorded = {1: {4: r1}, 6: {4: r2, 5: r1}}
    hold = track.expand(recorded, 10, 5, "hold")
    interp = track.expand(recorded, 10, 5, "interpolate")
    assert [(f, t) for f, t, _ in hold] == [(f, t) for f, t, _ in interp]
    h, i = {(f, t): b for f, t, b in hold}, {(f, t): b for f, t, b in interp}
    assert h[(3, 4)] == r1 and i[(3, 4)] == Box(4, 8, 18, 22, 0.9)  # 2/5 of the way
    assert h[(6, 4)] == i[(6, 4)] == r2  # refresh frames agree
    assert i[(10, 4)] == r2 and i[(10, 5)] == r1  # last refresh: held to the end
    assert {f for f, t, _ in hold if t == 5} == set(range(6, 11))
    # a refresh without the person ends its box (no box on frames 11-12)
    gap = track.expand({1: {4: r1}, 6: {4: r2}}, 12, 5, "interpolate")
    assert max(f for f, _, _ in gap) == 10


def test_record_clip_renumbers_and_sorts():
    outs = {f: out((0, 0, 50, 50, 7, 0.9), (50, 50, 100, 100, 2, 0.9) if f >= 6 else (0, 0, 0, 0, 2, 0.1))
            for f in range(1, 31)}
    rows = track.record_clip(outs, 30, width=100, height=100, adapt=Adapt(5, 2, 0.1))
    first = {}
    for f, pid, *_ in rows:
        first.setdefault(pid, f)
    assert first == {1: 6, 2: 11}  # track 7 first, then track 2
    assert rows == sorted(rows, key=lambda r: (r[0], r[1]))


def test_bad_settings():
    with pytest.raises(ValueError, match="box_mode"):
        track.expand({}, 10, 5, "nearest")
    with pytest.raises(ValueError, match="low_motion"):
        Adapt.from_dict({"interval": 0, "min_detections": 1, "min_area": 0.1}, "low_motion")
