"""Reproduce the paper's Table 1 with ``microg4m evaluate har`` from the authors' own detections.

    python bench/bench_har_protocol.py PATH/TO/MicroG-4M [--jobs 2] [--out bench/out/har_protocol]

``PATH/TO/MicroG-4M`` is a copy of the authors' repository (github.com/lei-qi-233/MicroG-4M):
a checkout or a bare git directory (read at HEAD). For each model folder of
``benchmark/evaluation_results/`` that holds ``detailed_csv/detections_test.csv``, the
script runs the command users run,

    microg4m evaluate har --gt ava_test_gt.csv --detections detections_test.csv \\
        --label-map annotations/label_map.pbtxt --json har.json --per-class ap_per_class.csv

and compares its four figures with the ``"mode": "test"`` line of the model's
``json_stats.log`` (PySlowFast's own output: the paper's Table 1) and its per-class AP with
``ap_per_class_test.csv``. Nothing of the authors' is copied into this repository: their
files are read into ``--out`` (git-ignored). The label map is this repository's
``annotations/label_map.pbtxt`` (the same file as theirs, blob f215550); its names are
checked against theirs in ``ap_per_class_test.csv``.

A figure that differs by more than ``--tolerance`` (0.001) is flagged, with the range the
evaluator can give when scores tie: the detections CSV keeps 4 decimals of each score, so
scores that differed in PySlowFast's memory may tie in the file, and the PASCAL evaluator
then orders them as NumPy's sort happens to. Writes ``table.md`` and ``summary.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = "benchmark/evaluation_results"
FIGURES = ("map", "f1_macro", "recall_macro", "auroc_macro")


class Source:
    """Files of the authors' repository: a checkout or a bare git directory."""

    def __init__(self, path: Path):
        self.path = path
        self.bare = not (path / RESULTS).is_dir()
        if self.bare and subprocess.run(["git", "--git-dir", str(path), "rev-parse", "HEAD"],
                                        capture_output=True).returncode != 0:
            raise SystemExit(f"{path}: neither a checkout (no {RESULTS}/) nor a git directory")

    def list(self, folder: str) -> list[str]:
        if not self.bare:
            return sorted(str(p.relative_to(self.path)) for p in (self.path / folder).rglob("*") if p.is_file())
        out = subprocess.run(["git", "--git-dir", str(self.path), "ls-tree", "-r", "--name-only", "HEAD", folder],
                             capture_output=True, text=True, check=True).stdout
        return out.split()

    def copy(self, rel: str, dest: Path) -> Path:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not self.bare:
            shutil.copyfile(self.path / rel, dest)
        else:
            with open(dest, "wb") as fh:
                subprocess.run(["git", "--git-dir", str(self.path), "show", f"HEAD:{rel}"], stdout=fh, check=True)
        return dest

    def revision(self) -> str:
        if self.bare:
            cmd = ["git", "--git-dir", str(self.path), "rev-parse", "--short", "HEAD"]
        else:
            cmd = ["git", "-C", str(self.path), "rev-parse", "--short", "HEAD"]
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip() or "unknown"


def test_stats(log: Path) -> dict:
    """The last ``"mode": "test"`` line of a json_stats.log."""
    lines = [ln for ln in log.read_text().splitlines() if '"mode": "test"' in ln]
    if not lines:
        raise ValueError(f"{log}: no test line")
    text = lines[-1].split("json_stats: ", 1)[1]
    return json.loads(text[: text.rindex("}") + 1])


def run_model(src: Source, model: str, out: Path, gt: Path, label_map: Path) -> dict:
    folder = out / model
    det = src.copy(f"{RESULTS}/{model}/detailed_csv/detections_test.csv", folder / "detections_test.csv")
    theirs_ap = src.copy(f"{RESULTS}/{model}/detailed_csv/ap_per_class_test.csv", folder / "theirs_ap_per_class.csv")
    theirs = test_stats(src.copy(f"{RESULTS}/{model}/json_stats.log", folder / "json_stats.log"))
    cmd = [sys.executable, "-m", "microg4m.cli", "evaluate", "har", "--gt", str(gt), "--detections", str(det),
           "--label-map", str(label_map), "--json", str(folder / "har.json"),
           "--per-class", str(folder / "ap_per_class.csv")]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{model}: {' '.join(cmd)} failed:\n{proc.stderr}")
    ours = json.loads((folder / "har.json").read_text())
    rows = list(csv.DictReader(open(theirs_ap)))
    names_agree = all(ours["ap_per_class"][r["action_id"]]["name"] == r.get("action_name") for r in rows)
    per_class = []
    for r in rows:
        mine = ours["ap_per_class"][r["action_id"]]
        want = float(r["ap50"])
        got = mine["ap"]
        if math.isnan(want) and got is None:
            continue
        lo, hi = mine["ap_tie_range"]
        per_class.append({"action_id": int(r["action_id"]), "theirs": want, "ours": got, "diff": abs(got - want),
                          "tie_range": [lo, hi], "within_ties": lo - 1e-5 <= want <= hi + 1e-5})
    return {"model": model, "theirs": {k: theirs[k] for k in FIGURES}, "ours": {k: ours[k] for k in FIGURES},
            "diff": {k: abs(ours[k] - theirs[k]) for k in FIGURES}, "map_tie_range": ours["map_tie_range"],
            "per_class": per_class, "label_names_agree": names_agree, "seconds": round(seconds, 1),
            "command": " ".join(cmd)}


def table(rows: list[dict], tol: float) -> str:
    head = ("| model | mAP ours / theirs | F1 ours / theirs | recall ours / theirs | AUROC ours / theirs "
            "| largest diff | per-class AP: largest diff, within tol | mAP over tied orders |")
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        o, t = r["ours"], r["theirs"]
        cells = [f"{o[k]:.5f} / {t[k]:.5f}" for k in FIGURES]
        worst = max(r["diff"].values())
        pc = r["per_class"]
        pc_worst = max(p["diff"] for p in pc)
        ok = sum(p["diff"] <= tol for p in pc)
        lo, hi = r["map_tie_range"]
        mark = "" if worst <= tol else " **(> tol)**"
        lines.append(f"| {r['model']} | {' | '.join(cells)} | {worst:.5f}{mark} | {pc_worst:.5f}, {ok}/{len(pc)} "
                     f"| {lo:.5f} to {hi:.5f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("authors_repo", type=Path, help="a copy of github.com/lei-qi-233/MicroG-4M (checkout or bare)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "har_protocol")
    ap.add_argument("--label-map", type=Path, default=REPO / "annotations" / "label_map.pbtxt")
    ap.add_argument("--models", nargs="*", help="model folders (default: every one with detections_test.csv)")
    ap.add_argument("--jobs", type=int, default=1, help="models evaluated at once")
    ap.add_argument("--tolerance", type=float, default=0.001)
    args = ap.parse_args()
    src = Source(args.authors_repo.resolve())
    models = args.models or sorted({p.split("/")[2] for p in src.list(RESULTS)
                                    if p.endswith("/detailed_csv/detections_test.csv") and p.count("/") == 4})
    args.out.mkdir(parents=True, exist_ok=True)
    gt = src.copy(f"{RESULTS}/groundtruth_files/ava_test_gt.csv", args.out / "ava_test_gt.csv")
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = list(pool.map(lambda m: run_model(src, m, args.out, gt, args.label_map), models))
    text = table(rows, args.tolerance)
    worst = max(rows, key=lambda r: max(r["diff"].values()))
    off = [r for r in rows if max(r["diff"].values()) > args.tolerance]
    notes = [f"authors' repository at {src.revision()}; {len(rows)} models; "
             f"{time.perf_counter() - t0:.0f} s with --jobs {args.jobs}",
             f"largest difference: {max(worst['diff'].values()):.5f} ({worst['model']}, "
             f"{max(worst['diff'], key=worst['diff'].get)})"]
    for r in rows:
        lo, hi = r["map_tie_range"]
        tied = [p for p in r["per_class"] if p["diff"] > args.tolerance]
        if r in off:
            inside = lo - 1e-5 <= r["theirs"]["map"] <= hi + 1e-5
            notes.append(f"{r['model']}: mAP {r['ours']['map']:.5f} vs {r['theirs']['map']:.5f}; theirs is "
                         f"{'inside' if inside else 'OUTSIDE'} the range over tied orders [{lo:.5f}, {hi:.5f}]")
        if tied:
            notes.append(f"{r['model']}: {len(tied)} of {len(r['per_class'])} classes' AP differ by more than "
                         f"{args.tolerance}; {sum(p['within_ties'] for p in tied)} of them lie within the range "
                         "over tied orders of that class")
    if not all(r["label_names_agree"] for r in rows):
        notes.append("WARNING: the label map's names differ from ap_per_class_test.csv's")
    report = text + "\n\n" + "\n".join(f"* {n}" for n in notes) + "\n"
    (args.out / "table.md").write_text(report)
    (args.out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
