"""Benchmark of scenes.detector on gradual transitions, hard cuts and clean clips (not run in CI).

Builds 3-s, 30 fps, 640x480 clips with ffmpeg from real footage of people shipped in
packages (microg4m.common.footage: dancer, pianist, Debian's vtest, carphone):

  gradual  every ordered pair of the four sources x every transition of
           microg4m.common.footage.GRADUAL (a cross-dissolve, xfade's pixel dissolve, a fade
           through black, a wipe left, a wipe up) x 0.5, 1.0 and 1.5 s, placed at a random frame inside
           the clip (seeded);
  cut      every ordered pair x 3 hard cuts at random frames;
  clean    the demo's videos (microg4m.stages.demo: dancer, pianist, zidane, carphone,
           noperson) cut into 3-s clips, and the whole of dancer, pianist and vtest cut
           into 3-s clips (no transition in any).

and reports per detector (content, the paper's; network, TransNetV2 alone; transnetv2, the
network with the wipes found beside it, as the scenes stage reports; both) the share of gradual
clips with a transition found inside the transition (frames first-3 .. last+3), and of
them marked gradual; the share of cut clips with the cut found (within one frame) and
marked hard; the share of clean clips with no transition; and TransNetV2's cost per
frame on this CPU (decoding to 48x27, inference; wall and process CPU seconds, torch's
threads) with the CPU's instruction sets beside it.

    .venv/bin/python bench/bench_transitions.py             # writes bench/out/transitions/
    .venv/bin/python bench/bench_transitions.py --quick     # 1 duration, fewer pairs

Prints a Markdown table and writes bench/out/transitions/summary.json and clips.csv.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the stages run torch

from common import REPO, git_rev, write_csv  # noqa: E402  (sets sys.path)

from microg4m.common import media, wipes  # noqa: E402
from microg4m.common.footage import GRADUAL, NORMALIZE, footage, transition_clip  # noqa: E402
from microg4m.engines import transnet  # noqa: E402
from microg4m.stages import demo, scenes  # noqa: E402

SOURCES = ["dancer", "pianist", "vtest", "carphone"]
DURATIONS = [0.5, 1.0, 1.5]
CUTS_PER_PAIR = 3
FRAMES = 90
DETECTORS = ["content", "network", "transnetv2", "both"]  # network: TransNetV2 alone, without the wipes
FLAGS = ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16",
         "amx_int8"]


def cpu() -> dict:
    """The CPU's model name and which of FLAGS it has (lscpu, else /proc/cpuinfo)."""
    text = ""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        pass
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("Model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("Flags")), [])
    if not flags and Path("/proc/cpuinfo").is_file():
        info = Path("/proc/cpuinfo").read_text()
        flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
        model = model or next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                               if ln.startswith("model name")), platform.processor())
    return {"model": model, "cores": os.cpu_count(), "flags": [f for f in FLAGS if f in flags]}


def seconds_of(name: str) -> float:
    return media.probe(footage(name)).duration


def start_in(rng: random.Random, name: str, need: float) -> float:
    """A random start second in footage ``name`` with ``need`` seconds after it."""
    return round(rng.uniform(0, max(0.0, seconds_of(name) - need - 0.2)), 2)


def plain_clip(src: Path, start: float, out: Path) -> Path:
    media.run_ffmpeg(["-ss", str(start), "-i", str(src), "-vf", NORMALIZE, "-frames:v", str(FRAMES), "-an",
                      "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p", str(out)],
                     what=f"clip {out.name}")
    return out


def build(folder: Path, quick: bool, seed: int = 38) -> list[dict]:
    """Every clip to measure: ``{clip, path, group, kind, seconds, first, last}``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    clips = []
    pairs = list(itertools.permutations(SOURCES, 2))
    durations = DURATIONS
    if quick:
        pairs, durations = pairs[::3], [1.0]
    for a, b in pairs:
        for kind in GRADUAL:
            for seconds in durations:
                length = round(seconds * 30)
                at = rng.randint(6, FRAMES - length - 5)
                name = f"{kind}_{seconds}_{a}_{b}"
                path = transition_clip(footage(a), footage(b), folder / f"{name}.mp4", kind=kind, at=at,
                                       seconds=seconds, a_start=start_in(rng, a, 3.2),
                                       b_start=start_in(rng, b, 3.2))
                clips.append(dict(clip=name, path=path, group="gradual", kind=kind, seconds=seconds, first=at,
                                  last=at + length - 1))
        for k in range(CUTS_PER_PAIR if not quick else 1):
            at = rng.randint(2, FRAMES)
            name = f"cut{k}_{a}_{b}"
            path = transition_clip(footage(a), footage(b), folder / f"{name}.mp4", kind="cut", at=at,
                                   a_start=start_in(rng, a, 3.2), b_start=start_in(rng, b, 3.2))
            clips.append(dict(clip=name, path=path, group="cut", kind="cut", seconds=0.0, first=at, last=at))
    videos = folder / "demo"
    videos.mkdir(exist_ok=True)
    plain = []
    for name in ("dancer", "pianist", "zidane", "carphone", "noperson"):
        video = demo.make(name, videos / f"{name}.mp4")
        plain += [(f"demo_{name}", video, s) for s in range(0, int(media.probe(video).duration) - 2, 3)]
    if not quick:
        for name in ("dancer", "pianist", "vtest"):
            plain += [(name, footage(name), s) for s in range(0, int(seconds_of(name)) - 3, 3)]
    for name, video, s in plain:
        path = plain_clip(video, s, folder / f"clean_{name}_{s:03d}.mp4")
        if media.count_frames(path) == FRAMES:
            clips.append(dict(clip=path.stem, path=path, group="clean", kind="none", seconds=0.0, first=0, last=0))
    return clips


def measure(clips: list[dict]) -> tuple[list[dict], dict]:
    """Each clip's transitions by detector, and TransNetV2's and content's cost."""
    import torch

    threads = torch.get_num_threads()
    # the stage's runtime (OpenVINO on the CPU), with the same threads as torch's
    infer = functools.partial(transnet.predict, runtime=transnet.runtime_for("cpu"), threads=threads)
    infer([transnet.read_small_frames(clips[0]["path"])])  # warm-up (and the ONNX export, once)
    cost = dict(decode_wall=0.0, decode_cpu=0.0, infer_wall=0.0, infer_cpu=0.0, content_wall=0.0,
                content_cpu=0.0, wipes_wall=0.0, wipes_cpu=0.0, frames=0, threads=threads,
                runtime=transnet.runtime_for("cpu"))
    rows = []
    for c in clips:
        t, p = time.perf_counter(), time.process_time()
        small = transnet.read_small_frames(c["path"])
        cost["decode_wall"] += time.perf_counter() - t
        cost["decode_cpu"] += time.process_time() - p
        t, p = time.perf_counter(), time.process_time()
        pred = infer([small])[0]
        cost["infer_wall"] += time.perf_counter() - t
        cost["infer_cpu"] += time.process_time() - p
        cost["frames"] += len(small)
        t, p = time.perf_counter(), time.process_time()
        content = scenes.clip_cuts(c["path"])
        cost["content_wall"] += time.perf_counter() - t
        cost["content_cpu"] += time.process_time() - p
        t, p = time.perf_counter(), time.process_time()
        swept = wipes.find_wipes(wipes.small_gray(c["path"]))
        cost["wipes_wall"] += time.perf_counter() - t
        cost["wipes_cpu"] += time.process_time() - p
        found = {"content": [transnet.Transition(x, x - 1, x - 1, False) for x in content]}
        found["network"] = transnet.transitions(*pred)
        found["transnetv2"] = scenes.with_wipes(found["network"], swept)  # as the scenes stage reports them
        found["both"] = transnet.union(content, found["transnetv2"])
        row = {k: v for k, v in c.items() if k != "path"}
        for det, ts in found.items():
            row[det] = ";".join(f"{t.frame}{'g' if t.gradual else ''}" for t in ts)
            row[f"{det}_hit"], row[f"{det}_kind_ok"] = judge(c, ts)
        row["peak"] = round(float(max(pred[0].max(), pred[1].max())), 3)
        rows.append(row)
    return rows, cost


def judge(c: dict, found: list) -> tuple[bool, bool]:
    """(the clip's truth was found, and with the right kind)."""
    if c["group"] == "clean":
        return not found, not found
    if c["group"] == "cut":
        near = [t for t in found if abs(t.frame - c["first"]) <= 1]
        return bool(near), any(not t.gradual for t in near)
    inside = [t for t in found if c["first"] - 3 <= t.frame <= c["last"] + 3]
    return bool(inside), any(t.gradual for t in inside)


def share(rows: list[dict], key: str) -> str:
    if not rows:
        return "-"
    hits = sum(bool(r[key]) for r in rows)
    return f"{hits}/{len(rows)} ({100 * hits / len(rows):.0f} %)"


def report(rows: list[dict], cost: dict, machine: dict) -> tuple[str, dict]:
    groups = {"gradual transitions found": [r for r in rows if r["group"] == "gradual"]}
    for kind in GRADUAL:
        groups[f"  {kind}"] = [r for r in rows if r["kind"] == kind]
    groups["hard cuts found (within 1 frame)"] = [r for r in rows if r["group"] == "cut"]
    groups["clean clips with no transition"] = [r for r in rows if r["group"] == "clean"]
    lines = ["| clips | " + " | ".join(DETECTORS) + " |", "|---|" + "---|" * len(DETECTORS)]
    summary = {}
    for label, rs in groups.items():
        cells = [share(rs, f"{d}_hit") for d in DETECTORS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
        summary[label.strip()] = {d: sum(bool(r[f"{d}_hit"]) for r in rs) / max(1, len(rs)) for d in DETECTORS}
        summary[label.strip()]["clips"] = len(rs)
    grad = groups["gradual transitions found"]
    cuts = groups["hard cuts found (within 1 frame)"]
    lines.append("| gradual ones marked gradual | - | " + " | ".join(share(grad, f"{d}_kind_ok") for d in DETECTORS[1:])
                 + " |")
    lines.append("| cuts marked hard | " + " | ".join(share(cuts, f"{d}_kind_ok") for d in DETECTORS) + " |")
    n = max(1, cost["frames"])
    per = {k: 1000 * cost[k] / n for k in ("decode_wall", "decode_cpu", "infer_wall", "infer_cpu", "content_wall",
                                            "content_cpu", "wipes_wall", "wipes_cpu")}
    lines += ["", f"CPU: {machine['model']}, {machine['cores']} cores; instruction sets: "
              f"{', '.join(machine['flags']) or 'none of ' + ', '.join(FLAGS)}; {cost['threads']} threads",
              "",
              "| per frame (ms) | wall | process CPU |", "|---|---|---|",
              f"| TransNetV2 inference (FP32, {cost['runtime']}) | {per['infer_wall']:.2f} | {per['infer_cpu']:.2f} |",
              f"| decoding to 48x27 (ffmpeg, a subprocess: its CPU time not counted) | {per['decode_wall']:.2f} | "
              f"{per['decode_cpu']:.2f} |",
              f"| content detector (PySceneDetect, decoding included) | {per['content_wall']:.2f} | "
              f"{per['content_cpu']:.2f} |",
              f"| wipes (microg4m.common.wipes, decoding to 80x60 gray included) | {per['wipes_wall']:.2f} | "
              f"{per['wipes_cpu']:.2f} |"]
    summary["cost_ms_per_frame"] = per
    return "\n".join(lines), summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "transitions")
    ap.add_argument("--quick", action="store_true", help="1 duration, every third pair, the demo's clean clips")
    ap.add_argument("--threads", type=int, default=0,
                    help="inference threads, torch's and OpenVINO's (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    clips = build(args.out / "clips", args.quick)
    built = time.perf_counter() - t0
    rows, cost = measure(clips)
    machine = cpu()
    table, summary = report(rows, cost, machine)
    write_csv(args.out / "clips.csv", rows)
    summary.update(machine=machine, threads=cost["threads"], runtime=cost["runtime"], commit=git_rev(),
                   python=sys.version.split()[0],
                   package=f"{transnet.PACKAGE}=={transnet.version()}", build_seconds=round(built, 1),
                   measure_seconds=round(time.perf_counter() - t0 - built, 1), quick=args.quick)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(table)


if __name__ == "__main__":
    main()
