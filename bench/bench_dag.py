"""Time Snakemake's dry run (DAG building) over a generated sources table.

    python bench/bench_dag.py --sources 10000                  # sources_per_job auto (the default), then 1
    python bench/bench_dag.py --sources 10000 --per-job 1 20 auto

Prints one line per setting: sources, sources_per_job, jobs, seconds. Nothing is
downloaded: a dry run only builds the DAG. Under ``auto`` the units follow this
machine's CPUs (microg4m/common/units.py), so the job count does too.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, write_csv  # noqa: E402


def per_job_value(value: str):
    """A sources_per_job value from the command line: ``auto`` or an integer >= 1."""
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: expected an integer >= 1 or auto")
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=10000)
    ap.add_argument("--per-job", type=per_job_value, nargs="+", default=["auto", 1],
                    help="sources_per_job values: integers >= 1 or auto")
    ap.add_argument("--csv", default=str(REPO / "bench" / "out" / "bench_dag.csv"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        shutil.copytree(REPO / "annotations", tmp / "annotations")
        table = tmp / "sources.tsv"
        with open(table, "w") as fh:
            fh.write("source_id\turl\tclip_type\n")
            for i in range(args.sources):
                fh.write(f"s{i:05d}\thttps://example.org/v{i:05d}.mp4\tr\n")
        for per_job in args.per_job:
            cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"), "-d", str(tmp),
                   "--configfile", str(REPO / "config" / "config.yaml"), "-n", "--quiet", "rules",
                   "--config", f"sources={table}", f"sources_per_job={per_job}"]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            if proc.returncode != 0:
                print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
                return 1
            total = re.search(r"^total\s+(\d+)$", proc.stdout + proc.stderr, re.M)
            rows.append({"sources": args.sources, "sources_per_job": per_job,
                         "jobs": int(total.group(1)) if total else -1, "seconds": round(seconds, 1)})
            print(rows[-1], flush=True)
    write_csv(Path(args.csv), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
