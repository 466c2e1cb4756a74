"""The comparison with the authors' scripts, shared by bench_fidelity.py and bench_workflow.py:
our tables concatenated over units, then the reference oracle's compare.py on them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
ORACLE = REPO.parent / "shared" / "tools" / "reference-oracle"


def concat(paths, out: Path, sep="\t", **kw) -> Path:
    frames = [pd.read_csv(p, sep=sep, dtype=str, keep_default_na=False) for p in sorted(paths)]
    df = pd.concat(frames, ignore_index=True)
    for col, value in kw.items():
        df = df[df[col] == value]
    df.to_csv(out, index=False)
    return out


def compare(oracle: Path, res: Path, work: Path, quiet: bool = False) -> dict:
    """compare.py of the oracle on the results folder ``res``; its SUMMARY as a dict
    (the full report in ``work/compare.txt``)."""
    from microg4m.formats.results_index import ResultsIndex

    t = work / "tables"
    t.mkdir(parents=True, exist_ok=True)
    index = ResultsIndex(res)
    units = [index.files(u) for u in index.units()]
    args = [
        "--oracle", str(oracle),
        "--trimmed", str(concat([f.manifest for f in units], t / "trimmed.csv", status="ok")),
        "--clip-col", "clip_id", "--frames-col", "frames",
        "--kept", str(concat([f.decisions for f in units], t / "kept.csv")), "--kept-col", "keep", "--kept-value", "1",
        "--boxes", str(concat([f.tracks for f in units], t / "boxes.csv", sep=",")),
        "--keyframes", str(res / "export" / "boxes.csv"),
        "--motion", str(concat([f.motion for f in units], t / "motion.csv")), "--motion-col", "level",
        "--json", str(work / "compare.json"),
    ]
    py = os.environ.get("REF_VENV", "/tmp/reference-oracle/venv") + "/bin/python"
    proc = subprocess.run([py, str(ORACLE / "compare.py"), *args], capture_output=True, text=True, check=True)
    (work / "compare.txt").write_text(proc.stdout)
    if not quiet:
        print(proc.stdout)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("SUMMARY"))
    return json.loads(line.split(" ", 1)[1])
