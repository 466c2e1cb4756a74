"""The README's demo, timed: ``snakemake --cores all`` as a new user runs it.

A fresh folder with the repository's ``config/`` (config.yaml, sources.tsv: the 8 demo
sources) and ``annotations/``, the default profile, nothing made before: the demo
videos are made inside the run (from footage that ships in Python packages), and the
detector is exported inside it. Not run in CI; time it on a quiet machine.

    .venv/bin/python bench/bench_demo.py                 # --cores all, once
    .venv/bin/python bench/bench_demo.py --repeats 3     # the best and the median of 3
    .venv/bin/python bench/bench_demo.py --preset strict --quality-clips   # the README's table of presets

``--preset NAME`` runs with ``config/presets/NAME.yaml`` over the config (as the README
says); ``--quality-clips`` adds two 3 s sources made here from the pianist footage, one
with burnt-in subtitles and one blurred (microg4m.common.footage, as tests/test_quality.py
makes them). Each run also prints the clips kept and the filter's reasons.

Prints, and writes to ``bench/out/bench_demo.csv``: wall seconds, user+sys CPU seconds
of the whole process tree, the jobs run, and the CPU's model and instruction sets
(microg4m.engines.hardware) with the load average before the run.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, git_rev, write_csv  # noqa: E402

from microg4m.engines import hardware  # noqa: E402


QUALITY_CLIPS = {"subtitled": ("text_clip", "subtitle"), "blurred": ("degraded_clip", "blur")}


def add_quality_clips(work: Path) -> None:
    """Two more local sources: the pianist with burnt-in subtitles, and blurred."""
    from microg4m.common import footage as fo

    rows = []
    for name, (make, kind) in QUALITY_CLIPS.items():
        path = work / "resources" / "extra" / f"{name}.mp4"
        path.parent.mkdir(parents=True, exist_ok=True)
        getattr(fo, make)(fo.footage("pianist"), path, kind=kind)
        rows.append(f"{name}\tresources/extra/{name}.mp4\tr\n")
    with open(work / "config" / "sources.tsv", "a") as fh:
        fh.writelines(rows)


def decisions(work: Path) -> str:
    """Clips kept, and the rejected ones by the filter's reason."""
    import pandas as pd

    from microg4m.formats.decisions import read_decisions

    tables = [read_decisions(p) for p in sorted((work / "results" / "filter").glob("*.tsv"))]
    reasons = pd.concat(tables)["reason"].value_counts() if tables else pd.Series(dtype=int)
    rejected = ", ".join(f"{r} {n}" for r, n in sorted(reasons.items()) if r != "kept")
    return f"{int(reasons.get('kept', 0))} kept" + (f"; rejected: {rejected}" if rejected else "")


def run_once(cores: str, preset: str | None = None, quality_clips: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="microg4m-demo-") as tmp:
        work = Path(tmp)
        shutil.copytree(REPO / "config", work / "config")
        shutil.copytree(REPO / "annotations", work / "annotations")
        if quality_clips:
            add_quality_clips(work)
        overlay = ["--configfile", "config/config.yaml", f"config/presets/{preset}.yaml"] if preset else []
        env = dict(os.environ, YOLO_OFFLINE="1", YOLO_CONFIG_DIR=str(work / ".yolo"))
        load = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"),
                               "-d", str(work), "--cores", cores, *overlay], capture_output=True, text=True,
                              env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"snakemake failed (exit {proc.returncode})")
        done = re.findall(r"(\d+) of (\d+) steps \(100%\) done", proc.stdout + proc.stderr)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "jobs": int(done[-1][1]) if done else -1,
                "load_before": round(load, 2), "decisions": decisions(work)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", default="all")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--preset", help="config/presets/NAME.yaml over the config (e.g. strict, fast)")
    ap.add_argument("--quality-clips", action="store_true", help="add a subtitled and a blurred source")
    ap.add_argument("--csv", default=str(REPO / "bench" / "out" / "bench_demo.csv"))
    args = ap.parse_args()
    cpu = hardware.isa_summary()
    rows = []
    for i in range(args.repeats):
        row = {"repeat": i + 1, **run_once(args.cores, args.preset, args.quality_clips), "cores": args.cores,
               "preset": args.preset or "", "quality_clips": args.quality_clips,
               "cpus": len(os.sched_getaffinity(0)), "cpu": cpu, "rev": git_rev()}
        rows.append(row)
        print(row, flush=True)
    walls = [r["wall_s"] for r in rows]
    what = f"demo{' + quality clips' if args.quality_clips else ''}{', preset ' + args.preset if args.preset else ''}"
    print(f"{what}, --cores {args.cores}: best {min(walls)} s, median {statistics.median(walls)} s; "
          f"{rows[-1]['decisions']}; {cpu}")
    write_csv(Path(args.csv), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
