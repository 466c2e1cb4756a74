"""Tracking: BoT-SORT (ultralytics, boxmot) on a real YOLO detection cache of real footage.

One source with five 90-frame clips is built once per session (real footage, real
weights, ``microg4m.stages.detect``); each test writes its own filter decisions and runs
``track.run``. The tracker loop is checked against ultralytics' own ``model.track`` on
the same clips, and the reference's record rules are unit-tested on tracker outputs
built by hand.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
import pytest

from conftest import ffmpeg, get_footage, make_clip
from microg4m.stages import detect, export, motion, track
from microg4m.formats import manifest as mf
from microg4m.common import media
from microg4m.engines import tracker as bot
from microg4m.stages.track import Adapt, Box, Rules
from microg4m.formats.motion import read_motion

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
    levels = read_motion(source / "motion.tsv")
    # t_003 turns grey after frame 8: its corners are lost and, as in the reference, only
    # the pairs measured until then count (the cut to grey moves them a lot)
    assert levels == {"t_000": "low", "t_001": "low", "t_002": "low", "t_003": "high", "t_004": "high"}


def test_one_moving_person_keeps_one_id(source, tmp_path):
    df = run_track(source, tmp_path, ["t_000"])
    assert len(df) >= 60  # one dancer, recorded from the 3rd refresh (frame 15) on
    top = df["person_id"].value_counts()
    assert top.iloc[0] / df["frame_id"].nunique() >= 0.9
    assert list(df.columns) == track.COLUMNS and (df["video_id"] == "t_000").all()


def test_two_people_two_ids_and_format(source, tmp_path):
    df = run_track(source, tmp_path, ["t_001"])
    assert sorted(df["person_id"].unique()) == [1, 2]
    # low motion: refreshes at 5, 10, ...; the 3rd sighting is at frame 15, then every frame
    for pid in (1, 2):
        assert list(df[df.person_id == pid]["frame_id"]) == list(range(15, 91))
    assert (df[["xmin", "ymin"]].to_numpy() >= 0).all()
    assert (df["xmax"] <= 960).all() and (df["ymax"] <= 540).all()
    assert ((df["xmax"] - df["xmin"]) * (df["ymax"] - df["ymin"]) >= 0.10 * 960 * 540).all()
    text = (tmp_path / "tracks.csv").read_text()
    assert text.startswith(",".join(track.COLUMNS) + "\n")
    first = text.splitlines()[1].split(",")
    assert first[3].isdigit() and first[6].isdigit()  # integer pixels, as the reference writes them
    assert len(first[7].split(".")[1]) == 4  # conf with 4 decimals
    assert df.equals(df.sort_values(["video_id", "frame_id", "person_id"]))
    # the keyframe of a person seen all clip long: the released convention (52 at low motion)
    clips = pd.DataFrame({"clip_id": ["t_001"], "width": [960], "height": [540], "frames": [90]}).set_index(
        "clip_id", drop=False)
    kf = export.keyframes(df, clips, export.Report())
    assert kf["frame_stamp"].tolist() == [52, 52]


def test_subpixel_option_keeps_the_tracker_coordinates(source, tmp_path):
    ints = run_track(source, tmp_path, ["t_001"])
    sub = run_track(source, tmp_path, ["t_001"], name="sub.csv", pixels="subpixel")
    assert (tmp_path / "sub.csv").read_text().splitlines()[1].split(",")[3].count(".") == 1
    cols = ["xmin", "ymin", "xmax", "ymax"]
    assert ints[["frame_id", "person_id"]].equals(sub[["frame_id", "person_id"]])
    diff = sub[cols].to_numpy() - ints[cols].to_numpy()
    assert (diff >= 0).all() and (diff < 1).all() and diff.max() > 0  # truncation toward zero


def test_closeup_records_only_the_largest_person(source, tmp_path):
    df = run_track(source, tmp_path, ["t_002"])
    assert df["person_id"].nunique() == 1
    area = ((df["xmax"] - df["xmin"]) * (df["ymax"] - df["ymin"])) / (470 * 286)
    assert (area >= 0.5).all()
    # the man at the right edge is big enough to be recorded without the rule
    off = run_track(source, tmp_path, ["t_002"], name="off.csv", closeup_area=1.0)
    assert off["person_id"].nunique() == 2


def test_too_few_refreshes_no_box(source, tmp_path):
    # two men on frames 1-8 only: seen on the refresh at frame 5 only
    df = run_track(source, tmp_path, ["t_003"], motion_rows={"t_003": "low"})
    assert df.empty
    one = run_track(source, tmp_path, ["t_003"], name="one.csv", motion_rows={"t_003": "low"},
                    low_motion={"interval": 5, "min_detections": 1, "min_area": 0.1})
    assert sorted(one["frame_id"].unique()) == [5, 6, 7, 8, 9]  # held until the next refresh
    assert one["person_id"].nunique() == 2


def test_hold_and_interpolate(source, tmp_path):
    hold = run_track(source, tmp_path, ["t_004"], name="hold.csv")
    interp = run_track(source, tmp_path, ["t_004"], name="interp.csv", box_mode="interpolate")
    key = ["video_id", "frame_id", "person_id"]
    assert hold[key].equals(interp[key])  # same frames and persons
    cols = ["xmin", "ymin", "xmax", "ymax"]
    refresh = hold["frame_id"].isin(track.refresh_frames(90, HIGH.interval))  # high motion
    np.testing.assert_array_equal(hold.loc[refresh, cols], interp.loc[refresh, cols])
    diff = hold.loc[~refresh, cols].to_numpy() - interp.loc[~refresh, cols].to_numpy()
    assert np.abs(diff).max() > 3  # the camera pans 4 px per frame
    # hold repeats the refreshed box until the next refresh
    for pid, g in hold.groupby("person_id"):
        g = g.set_index("frame_id")
        for f in g.index:
            r = f - f % HIGH.interval
            if r in g.index:
                assert (g.loc[f, cols] == g.loc[r, cols]).all()


def test_boxmot_backend_tracks_too(source, tmp_path):
    df = run_track(source, tmp_path, ["t_001"], name="boxmot.csv", tracker="boxmot")
    assert df["person_id"].nunique() == 2
    assert df["frame_id"].min() == 15 and df["frame_id"].max() == 90


def _model_track(model, clip, cfg=None, imgsz=320):
    """ultralytics' own model.track on a clip (its default tracker when ``cfg`` is None):
    frame -> rows x1, y1, x2, y2, id, conf, cls."""
    out = {}
    kw = {"tracker": str(cfg)} if cfg else {}
    for n, r in enumerate(model.track(source=str(clip), stream=True, imgsz=imgsz, verbose=False, **kw),
                          start=1):
        b = r.boxes
        out[n] = (np.c_[b.xyxy.numpy(), b.id.numpy(), b.conf.numpy(), b.cls.numpy()]
                  if b.is_track else np.empty((0, 7)))
    return out


@pytest.mark.parametrize("settings", ["reference", "model_track_default"])
def test_tracker_loop_gives_what_model_track_gives(source, tmp_path, weights, settings):
    """Fed the cache, the tracker reproduces ultralytics' model.track (the reference's
    calls: with the authors' botsort.yaml in their track stage, with ultralytics' default
    tracker in their filter) frame by frame: same ids, boxes within float noise (batched
    vs single-frame inference)."""
    import yaml
    from ultralytics import YOLO

    cfg = None
    if settings == "reference":
        cfg = tmp_path / "botsort.yaml"
        cfg.write_text(yaml.safe_dump({
            "tracker_type": "botsort", **{k: v for k, v in bot.REFERENCE.items() if k != "cmc_method"},
            "gmc_method": "sparseOptFlow", "with_reid": False, "model": "auto"}))
    model = YOLO(str(weights))
    dets = track.load_detections(source / "detections.parquet")
    for clip in ("t_001", "t_004"):
        path = source / "clips" / "t" / f"{clip}.mp4"
        ref = _model_track(model, path, cfg)
        h, w = media.read_frames(path, limit=1)[0].shape[:2]
        t = bot.make("ultralytics") if cfg else bot.model_track_default()
        ours = dict(bot.run(t, media.iter_frames(path), dets[clip], width=w, height=h))
        assert sorted(ours) == sorted(ref) == list(range(1, 91))
        for n in ref:
            assert len(ours[n]) == len(ref[n]), (clip, n)
            np.testing.assert_array_equal(ours[n][:, 4], ref[n][:, 4])  # ids, in the same order
            np.testing.assert_allclose(ours[n][:, :4], ref[n][:, :4], atol=0.05)
            np.testing.assert_allclose(ours[n][:, 5], ref[n][:, 5], atol=1e-3)


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


@pytest.mark.parametrize("settings, match", [
    ({"botsort": {"track_hi": 0.5}}, "unknown settings.*'track_hi'"),
    ({"botsort": {"cmc_method": "dense"}}, "cmc_method = 'dense'"),
    ({"tracker": "sort"}, "track.tracker = 'sort'"),
    ({"person_ids": "random"}, "track.person_ids"),
    ({"pixels": "half"}, "track.pixels"),
])
def test_bad_settings_name_the_key(source, tmp_path, settings, match):
    with pytest.raises(ValueError, match=match):
        run_track(source, tmp_path, ["t_001"], **settings)


# ---------------------------------------------------------------- record rules on hand-made outputs

W = H = 100
BIG = (0, 0, 40, 40)  # 0.16 of the frame: above the low-motion minimum (0.10)


def rows(*boxes):
    """Tracker output rows ``x1, y1, x2, y2, id, conf, cls`` (cls 0 unless given)."""
    return np.array([[*b[:4], b[4], b[5], b[6] if len(b) > 6 else 0] for b in boxes], dtype=float)


def every_frame(n=90, **by_frame):
    """The same output on frames 1..n (``by_frame`` overrides frames: f12=rows(...))."""
    return lambda *boxes: {f: by_frame.get(f"f{f}", rows(*boxes)) for f in range(1, n + 1)}


def record(outputs, adapt=LOW, **rules):
    return track.record_clip(outputs, 90, width=W, height=H, adapt=adapt, rules=Rules(**rules))


def frames_of(recorded, pid):
    return [f for f, p, *_ in recorded if p == pid]


def keyframe(recorded):
    df = pd.DataFrame([("c", f, p, *b) for f, p, *b in recorded], columns=track.COLUMNS)
    clips = pd.DataFrame({"clip_id": ["c"], "width": [W], "height": [H], "frames": [90]}).set_index(
        "clip_id", drop=False)
    return export.keyframes(df, clips, export.Report())["frame_stamp"].tolist()


def test_refresh_frames_start_at_the_interval():
    assert track.refresh_frames(90, 5)[:3] == [5, 10, 15] and track.refresh_frames(90, 5)[-1] == 90
    assert track.refresh_frames(90, 3)[:2] == [3, 6] and len(track.refresh_frames(90, 1)) == 90


def test_low_motion_person_seen_all_clip_long():
    out = record(every_frame()((*BIG, 7, 0.9)))
    assert frames_of(out, 1) == list(range(15, 91))  # 3rd sighting at the refresh of frame 15
    assert keyframe(out) == [52]  # the released data's stamp for such a person


def test_high_motion_person_seen_all_clip_long():
    out = record(every_frame()((0, 0, 50, 50, 7, 0.9)), adapt=HIGH)
    assert frames_of(out, 1) == list(range(6, 91))  # 2nd sighting at frame 6
    assert keyframe(out) == [48]


def test_boxes_are_held_between_refreshes():
    outs = {f: rows((f, 0, 40 + f, 40, 7, 0.9)) for f in range(1, 91)}  # moves 1 px a frame
    out = record(outs)
    for f, pid, x1, *_ in out:
        assert x1 == f - f % 5  # the box of the last refresh at or before f


def test_sightings_count_any_class_and_confidence_and_ids_have_gaps():
    # track 3 (a chair, or a faint person) is seen first and takes person id 1; it is never
    # recorded, so the recorded ids start at 2, as in the released data
    chair = (50, 50, 100, 100, 3, 0.95, 56)
    faint = (50, 50, 100, 100, 4, 0.3)
    for other in (chair, faint):
        out = record(every_frame()(other, (*BIG, 7, 0.9)))
        assert {p for _, p, *_ in out} == {2}
    # but a non-person box also counts towards its own track only: the person still needs
    # three sightings of its own
    out = record(every_frame()(chair, (*BIG, 7, 0.9)))
    assert frames_of(out, 2)[0] == 15


def test_ids_follow_the_first_sighting_in_tracker_order():
    a, b = (0, 0, 40, 40, 9, 0.9), (60, 60, 100, 100, 2, 0.9)
    out = record(every_frame()(a, b))
    first = {p: frames_of(out, p) for p in (1, 2)}
    assert first[1] == first[2] == list(range(15, 91))
    assert [r[2] for r in out if r[1] == 1][:1] == [0]  # person 1 = track 9 (output first)
    # contiguous ids number by first recorded frame instead
    late = {f: rows(a, b) if f >= 20 else rows(a) for f in range(1, 91)}
    gapped = record({f: rows((50, 50, 100, 100, 5, 0.2), *r) for f, r in
                     ((f, late[f]) for f in late)})
    assert {p for _, p, *_ in gapped} == {2, 3}
    contiguous = record({f: rows((50, 50, 100, 100, 5, 0.2), *late[f]) for f in late},
                        person_ids="contiguous")
    assert {p for _, p, *_ in contiguous} == {1, 2}


def test_small_boxes_are_not_sightings():
    small = (60, 60, 90, 90, 3, 0.9)  # 0.09 < 0.10
    out = record(every_frame()(small, (*BIG, 7, 0.9)))
    assert {p for _, p, *_ in out} == {1}  # the small box takes no id at all


def test_truncation_to_integer_pixels():
    # 31.9 x 31.9 = 1018 px^2 >= 1000 (0.10 of 100 x 100) as floats, but 31 x 31 = 961 truncated
    almost = (1.0, 1.0, 32.9, 32.9, 7, 0.9)
    assert record(every_frame()(almost)) == []
    assert frames_of(record(every_frame()(almost), pixels="subpixel"), 1)[0] == 15
    out = record(every_frame()((10.9, 20.5, 50.99, 70.2, 7, 0.9)))
    assert out[0][2:6] == (10.0, 20.0, 50.0, 70.0)


def test_confident_person_only_is_recorded():
    out = record(every_frame()((*BIG, 7, 0.55), (60, 0, 100, 40, 8, 0.56), (0, 60, 40, 100, 9, 0.9, 1)))
    assert {p for _, p, *_ in out} == {2}  # conf must exceed 0.55; class 0 only


def test_closeup_selection_enters_and_leaves():
    big = (0, 0, 80, 80, 1, 0.9)  # 0.64 of the frame
    shrunk = (0, 0, 60, 60, 1, 0.9)  # 0.36
    other = (60, 60, 100, 100, 2, 0.9)  # 0.16
    outs = {}
    for f in range(1, 91):
        if f <= 40:
            outs[f] = rows(big, other)  # selected from frame 5 on
        elif f <= 60:
            outs[f] = rows(shrunk, other)  # shrinks: the selection ends at refresh 45
        elif f <= 75:
            outs[f] = rows(big, other)  # selected again from refresh 65
        else:
            outs[f] = rows(other)  # lost: the selection ends at refresh 80
    out = record(outs)
    assert frames_of(out, 1) == list(range(15, 80))
    two = frames_of(out, 2)
    # person 2 is recorded where no close-up is selected: at the refresh that ends one, until
    # the refresh that starts the next, and after the last one ends
    assert two == list(range(45, 65)) + list(range(80, 91))


def test_closeup_needs_more_than_half_and_keeps_at_half():
    half = (0, 0, 50, 100, 1, 0.9)  # exactly 0.5: not selected (needs more than half)
    other = (60, 60, 100, 100, 2, 0.9)
    assert {p for _, p, *_ in record(every_frame()(half, other))} == {1, 2}
    # once selected, exactly half keeps the selection (it ends below half)
    outs = {f: rows((0, 0, 51, 100, 1, 0.9), other) if f <= 10 else rows(half, other) for f in range(1, 91)}
    assert {p for _, p, *_ in record(outs)} == {1}


def test_closeup_of_a_person_without_enough_sightings_records_nobody():
    big = (0, 0, 80, 80, 1, 0.9)
    other = (60, 60, 100, 100, 2, 0.9)
    # person 1 has been seen since frame 5; the big one (person 2) appears at frame 20:
    # selected at once but recorded only from its 3rd sighting; person 1 is not recorded
    # meanwhile
    outs = {f: rows(big, other) if f >= 20 else rows(other) for f in range(1, 91)}
    out = record(outs)
    assert frames_of(out, 1) == [15, 16, 17, 18, 19]
    assert frames_of(out, 2)[0] == 30


def test_empty_refresh_clears_the_boxes():
    outs = {f: rows((*BIG, 7, 0.9)) if not 30 <= f <= 34 else np.empty((0, 7)) for f in range(1, 91)}
    out = record(outs)
    assert 30 not in frames_of(out, 1) and 34 not in frames_of(out, 1) and 35 in frames_of(out, 1)


def test_interpolate_option_moves_between_refreshes():
    outs = {f: rows((f, 0, 40 + f, 40, 7, 0.9)) for f in range(1, 91)}
    out = record(outs, box_mode="interpolate", pixels="subpixel")
    x1 = {r[0]: r[2] for r in out}
    assert x1[15] == 15 and x1[17] == pytest.approx(17) and x1[90] == 90


def test_tracker_output_is_clipped_to_the_frame():
    """The real tracker on hand-made detections: output boxes are clipped like ultralytics'
    Results.update does, and a new track is output from its first frame only on frame 1."""
    t = bot.make("ultralytics", botsort={"cmc_method": "none"})
    det = np.array([[-20, -10, 60, 50, 0.9, 0]], dtype=np.float32)
    late = np.array([[70, 70, 99, 99, 0.9, 0]], dtype=np.float32)
    dets = {f: det if f < 5 else np.concatenate([det, late]) for f in range(1, 8)}
    out = dict(bot.run(t, [None] * 7, dets, width=W, height=H))
    assert out[1].shape == (1, 7) and out[1][0, 0] == 0 and out[1][0, 1] == 0
    assert len(out[5]) == 1 and len(out[6]) == 2  # the late track is output from its 2nd frame


def test_bad_rules():
    with pytest.raises(ValueError, match="box_mode"):
        track.expand({}, 10, 5, "nearest")
    with pytest.raises(ValueError, match="low_motion"):
        Adapt.from_dict({"interval": 0, "min_detections": 1, "min_area": 0.1}, "low_motion")
    with pytest.raises(ValueError, match="track.box_mode"):
        Rules(box_mode="nearest")
