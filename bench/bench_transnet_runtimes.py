"""TransNetV2 on the CPU with torch, ONNX Runtime and OpenVINO (what the scenes stage runs on a CPU):
CPU time per frame and the largest difference of the probabilities from torch's.

    .venv/bin/python bench/bench_transnet_runtimes.py              # 4 clips, one thread
    .venv/bin/python bench/bench_transnet_runtimes.py --clips 8 --threads 2

The clips are made with ffmpeg from the package footage (dancer -> pianist, dissolves at
different frames); each runs as the stage runs it (the authors' windows: 100 frames every
50, two windows a pass). ONNX Runtime and OpenVINO run the stage's ONNX export
(microg4m.engines.transnet.onnx_file, compiled as the stage compiles it); OpenVINO also
tries to convert the torch model itself (``openvino.convert_model``), and a conversion
that fails is printed as such. The one-off costs (the export, OpenVINO's compile) are
printed apart. The CPU's instruction sets are printed with the figures.
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

from microg4m.common.footage import footage, transition_clip  # noqa: E402
from microg4m.engines import hardware, transnet  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    os.environ.pop("MICROG4M_EXPORT_CACHE", None)  # the stage's export goes into this run's folder
    wrapped = transnet.logits_module()  # what the stage exports
    with tempfile.TemporaryDirectory() as tmp:
        batches = []
        for k in range(a.clips):
            clip = transition_clip(footage("dancer"), footage("pianist"), Path(tmp) / f"c{k}.mp4", kind="dissolve",
                                   at=11 + 15 * k % 50, seconds=1.0, a_start=1 + k, b_start=20 + k)
            windows = transnet._windows(transnet.read_small_frames(clip))
            batches += [np.stack(windows[i:i + transnet.BATCH]) for i in range(0, len(windows), transnet.BATCH)]
        frames = sum(len(b) for b in batches) * transnet.STEP  # frames kept from the windows

        def run_torch(x):
            with torch.inference_mode():
                s, m = wrapped(torch.from_numpy(x))
            return s.numpy(), m.numpy()

        runners = {"torch": run_torch}
        failures, once = {}, {}
        models = Path(tmp) / "models"
        t = time.process_time()
        path = transnet.onnx_file(models)  # the stage's ONNX export
        once["the ONNX export (torch's exporter, once per export cache)"] = time.process_time() - t
        try:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads, opts.inter_op_num_threads = a.threads, 1
            session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            runners["ONNX Runtime (FP32)"] = lambda x: tuple(session.run(None, {"frames": x}))
        except Exception as exc:  # noqa: BLE001  (reported, not fatal: a benchmark of what works)
            failures["ONNX Runtime (FP32)"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        t = time.process_time()
        from_onnx = transnet.openvino_model(a.threads, str(models))  # the stage's compiled model
        once["OpenVINO: convert and compile that export (once per scenes job)"] = time.process_time() - t
        runners["OpenVINO (FP32, from the ONNX export: the stage's on a CPU)"] = lambda x: tuple(from_onnx(x).values())
        ov_config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": a.threads,
                     "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}
        try:
            import openvino as ov

            converted = ov.convert_model(wrapped, example_input=torch.from_numpy(batches[0]))
            compiled = ov.Core().compile_model(converted, "CPU", ov_config)
            runners["OpenVINO (FP32)"] = lambda x: tuple(compiled(x).values())
        except Exception as exc:  # noqa: BLE001
            failures["OpenVINO (FP32)"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160]}"

        want = [run_torch(x) for x in batches]
        print(f"CPU: {hardware.isa_summary()}; {a.threads} thread(s); {a.clips} clips, {frames} frames; "
              f"best of {a.repeat}")
        print("| runtime | CPU-ms a frame | largest difference from torch (logits) |")
        print("|---|---|---|")
        for name, run in runners.items():
            got = [run(x) for x in batches]
            diff = max(float(np.abs(np.asarray(g[i]) - w[i]).max()) for g, w in zip(got, want) for i in (0, 1))
            best = float("inf")
            for _ in range(a.repeat):
                t = time.process_time()
                for x in batches:
                    run(x)
                best = min(best, (time.process_time() - t) / frames * 1000)
            print(f"| {name} | {best:.1f} | {diff:.2g} |", flush=True)
        for name, why in failures.items():
            print(f"| {name} | fails: {why} | |")
        print("\n| once | CPU-s |\n|---|---|")
        for name, seconds in once.items():
            print(f"| {name} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
