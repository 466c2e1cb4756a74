"""The README's demo, timed: ``snakemake --cores all`` as a new user runs it.

A fresh folder with the repository's ``config/`` (config.yaml, sources.tsv: the 8 demo
sources) and ``annotations/``, the default profile, nothing made before: the demo
videos are made inside the run (from footage that ships in Python packages), and the
detector is exported inside it. Not run in CI; time it on a quiet machine.

    .venv/bin/python bench/bench_demo.py                 # --cores all, once
    .venv/bin/python bench/bench_demo.py --repeats 3     # the best and the median of 3

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


def run_once(cores: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="microg4m-demo-") as tmp:
        work = Path(tmp)
        shutil.copytree(REPO / "config", work / "config")
        shutil.copytree(REPO / "annotations", work / "annotations")
        env = dict(os.environ, YOLO_OFFLINE="1", YOLO_CONFIG_DIR=str(work / ".yolo"))
        load = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"),
                               "-d", str(work), "--cores", cores], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"snakemake failed (exit {proc.returncode})")
        done = re.findall(r"(\d+) of (\d+) steps \(100%\) done", proc.stdout + proc.stderr)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "jobs": int(done[-1][1]) if done else -1,
                "load_before": round(load, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", default="all")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--csv", default=str(REPO / "bench" / "out" / "bench_demo.csv"))
    args = ap.parse_args()
    cpu = hardware.isa_summary()
    rows = []
    for i in range(args.repeats):
        row = {"repeat": i + 1, **run_once(args.cores), "cores": args.cores, "cpus": len(os.sched_getaffinity(0)),
               "cpu": cpu, "rev": git_rev()}
        rows.append(row)
        print(row, flush=True)
    walls = [r["wall_s"] for r in rows]
    print(f"demo, --cores {args.cores}: best {min(walls)} s, median {statistics.median(walls)} s; {cpu}")
    write_csv(Path(args.csv), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
