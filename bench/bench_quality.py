"""Benchmark of the quality stage's scores on constructed footage (not run in CI).

Builds 3-s, 30 fps, 640x480 clips with ffmpeg (microg4m.common.footage) from footage that
ships in packages (stills: zidane, bus; video: dancer, pianist, bikes, Debian's vtest):

  text     per source: burnt-in subtitles (a line over the lower third, a new one every
           second), a small corner logo, and no text;
  picture  per source: Gaussian blur (sigma 6), darker (eq brightness -0.35), brighter (+0.45);
  camera   per source but bikes (a trailer whose own camera moves): a static camera, pans and tilts at 1.5 and 4 px a frame, zooms in at
           1.5 and 3 / 640 of the frame a frame, and hand-held shake of about 3 and 6 px;

and reports: the share of subtitle frames scored as text (every frame searched: text area
>= quality.text_min_area), the logo clips' text_share and text_area (every frame, and at
the defaults), the camera class accuracy per class at the defaults, the blurred and exposed clips' scores against the plain ones, each score's CPU-ms
per frame on this CPU with its instruction sets beside it, and the quality stage's whole
cost (process CPU seconds: start, model load, decode and scores) on 60 of the clips at the
defaults, run as the workflow runs it (microg4m.stages.quality.run in a fresh process).

    .venv/bin/python bench/bench_quality.py            # writes bench/out/quality/
    .venv/bin/python bench/bench_quality.py --quick    # 2 sources per group

Prints a Markdown summary and writes bench/out/quality/summary.json and clips.csv.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, git_rev, write_csv  # noqa: E402  (sets sys.path)

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from bench_transitions import cpu  # noqa: E402
from microg4m import config  # noqa: E402
from microg4m.common import camera_motion, footage as fo, image_quality  # noqa: E402
from microg4m.engines import text_detector  # noqa: E402
from microg4m.formats import manifest as mf  # noqa: E402
from microg4m.stages import quality  # noqa: E402

STILLS = ["zidane", "bus"]
VIDEOS = ["dancer", "pianist", "bikes", "vtest"]
# bikes.mp4 is an edited trailer whose own camera pans and cuts: a synthetic move over it
# is not the only camera motion, so it gets text and picture clips but no camera clips
NO_CAMERA = {"bikes"}
SPEEDS = {"static": [1.0], "pan": [1.5, 4.0], "tilt": [1.5, 4.0], "zoom": [1.5, 3.0], "shake": [3.0, 6.0]}
DEFAULTS = config.validate({"sources": "x"})["quality"]


def sources(quick: bool) -> list[str]:
    found = []
    for name in STILLS + VIDEOS:
        try:
            fo.footage(name)
            found.append(name)
        except fo.FootageMissing as exc:
            print(f"skipped {name}: {exc}", file=sys.stderr)
    return [s for s in found if s in ("zidane", "pianist")] if quick else found


def build(folder: Path, names: list[str]) -> list[dict]:
    clips = []
    for name in names:
        src = fo.footage(name)
        start = 0.0 if name in STILLS else 1.0
        for kind in ("subtitle", "logo", "none"):
            out = folder / f"text_{kind}_{name}.mp4"
            if not out.is_file():
                fo.text_clip(src, out, kind=kind, start=start)
            clips.append(dict(clip=out.stem, path=out, group="text", kind=kind, source=name, speed=0.0))
        for kind in ("blur", "dark", "bright"):
            out = folder / f"picture_{kind}_{name}.mp4"
            if not out.is_file():
                fo.degraded_clip(src, out, kind=kind, start=start)
            clips.append(dict(clip=out.stem, path=out, group="picture", kind=kind, source=name, speed=0.0))
        for kind, speeds in SPEEDS.items():
            if name in NO_CAMERA:
                break
            for speed in speeds:
                out = folder / f"camera_{kind}_{speed:g}_{name}.mp4"
                if not out.is_file():
                    fo.camera_clip(src, out, kind=kind, speed=speed, start=start)
                clips.append(dict(clip=out.stem, path=out, group="camera", kind=kind, source=name, speed=speed))
    return clips


def cost_per_frame(clips: list[dict]) -> dict:
    """CPU-ms per frame of each score, on every clip's frames sampled as the defaults do."""
    size, every = DEFAULTS["size"], DEFAULTS["every"]
    t = {"decode (grab every frame)": 0.0, "scale to quality.size": 0.0, "camera (flow + fit)": 0.0,
         "sharpness": 0.0, "exposure": 0.0, "text detection": 0.0}
    n = {k: 0 for k in t}
    text_detector.detector(size)  # loaded outside the timing
    for c in clips:
        cap = cv2.VideoCapture(str(c["path"]))
        frames, k = [], 0
        t0 = time.process_time()
        while cap.grab():
            if k % every == 0:
                frames.append(cap.retrieve()[1])
            k += 1
        cap.release()
        t["decode (grab every frame)"] += time.process_time() - t0
        n["decode (grab every frame)"] += k
        t0 = time.process_time()
        small = [text_detector.scaled(f, size) for f in frames]
        grays = [cv2.cvtColor(s, cv2.COLOR_BGR2GRAY) for s in small]
        t["scale to quality.size"] += time.process_time() - t0
        n["scale to quality.size"] += len(frames)
        for key, fn, items in (("camera (flow + fit)", lambda g: camera_motion.camera_motion(g, gap=every), [grays]),
                               ("sharpness", image_quality.sharpness, grays),
                               ("exposure", image_quality.exposure, grays),
                               ("text detection", lambda s: text_detector.text_area(s, size), small)):
            t0 = time.process_time()
            for item in items:
                fn(item)
            t[key] += time.process_time() - t0
            n[key] += len(grays) if key == "camera (flow + fit)" else len(items)
    return {k: round(1000 * t[k] / max(1, n[k]), 3) for k in t}


def stage_cost(clips: list[dict], folder: Path, count: int = 60, **settings) -> dict:
    """The quality stage on ``count`` clips in a fresh process (``settings``: the quality
    section's, else the defaults): its CPU seconds and wall."""
    from microg4m.common import media

    unit = folder / "unit"
    unit.mkdir(parents=True, exist_ok=True)
    rows = []
    for seq, c in enumerate(clips[:count]):
        link = unit / f"u_{seq:03d}.mp4"
        if not link.exists():
            link.symlink_to(c["path"].resolve())
        info = media.probe(link)
        rows.append(dict(clip_id=link.stem, source_id="u", clip_type="r", seq=seq, start_s=3 * seq, frames=90,
                         width=info.width, height=info.height, status="ok", reason=""))
    mf.write_manifest(unit / "manifest.tsv", rows)
    scenes = folder / "unit_scenes.tsv"
    scenes.write_text("clip_id\tcuts\tgradual\n" + "".join(f"{r['clip_id']}\t\t\n" for r in rows))
    code = ("import resource, time, sys; t = time.time(); "
            "from microg4m.stages import quality; "
            f"quality.run({str(unit / 'manifest.tsv')!r}, {str(scenes)!r}, {str(folder / 'unit_quality.tsv')!r}, "
            f"**{settings!r}); "
            "r = resource.getrusage(resource.RUSAGE_SELF); "
            "print(r.ru_utime + r.ru_stime, time.time() - t)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    cpu_s, wall = (float(x) for x in proc.stdout.split()[-2:])
    return {"settings": settings or "defaults", "clips": len(rows), "cpu_s": round(cpu_s, 2), "wall_s": round(wall, 2),
            "cpu_ms_per_clip": round(1000 * cpu_s / len(rows), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 sources (a still and a video)")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "quality"))
    args = ap.parse_args()
    out = Path(args.out)
    folder = out / "clips"
    folder.mkdir(parents=True, exist_ok=True)
    clips = build(folder, sources(args.quick))

    rows = []
    for c in clips:
        every_frame = quality.clip_scores(c["path"], text_every=1) if c["group"] == "text" else {}
        s = quality.clip_scores(c["path"])  # the defaults
        rows.append(dict(clip=c["clip"], group=c["group"], kind=c["kind"], source=c["source"], speed=c["speed"],
                         text_share_every_frame=every_frame.get("text_share", ""),
                         text_area_every_frame=every_frame.get("text_area", ""),
                         **{k: s[k] for k in ("text_share", "text_area", "camera", "camera_magnitude", "sharpness",
                                              "exposure", "clipped")}))
    write_csv(out / "clips.csv", rows)

    subs = [r for r in rows if r["kind"] == "subtitle"]
    logos = [r for r in rows if r["kind"] == "logo"]
    plain = [r for r in rows if r["group"] == "text" and r["kind"] == "none"]
    cams = [r for r in rows if r["group"] == "camera"]
    summary = {
        "git": git_rev(), "cpu": cpu(), "defaults": DEFAULTS, "clips": len(rows),
        "subtitle_frames_scored_as_text": round(float(np.mean([r["text_share_every_frame"] for r in subs])), 4),
        "subtitle_clips_min_share": min(r["text_share_every_frame"] for r in subs),
        "logo_text_share_every_frame_max": max(r["text_share_every_frame"] for r in logos),
        "logo_text_area_every_frame_max": max(r["text_area_every_frame"] for r in logos),
        "logo_text_share_defaults_max": max(r["text_share"] for r in logos),
        "no_text_area_max": max(r["text_area_every_frame"] for r in plain),
        "sharpness_blurred_max": round(max(r["sharpness"] for r in rows if r["kind"] == "blur"), 4),
        "sharpness_unblurred_min": round(min(r["sharpness"] for r in rows if r["kind"] != "blur"), 4),
        "exposure_dark_max": round(max(r["exposure"] for r in rows if r["kind"] == "dark"), 4),
        "exposure_bright_min": round(min(r["exposure"] for r in rows if r["kind"] == "bright"), 4),
        "exposure_plain_range": [round(min(r["exposure"] for r in plain), 4), round(max(r["exposure"] for r in plain), 4)],
        "camera_accuracy": {k: f"{sum(r['camera'] == k for r in cams if r['kind'] == k)}/"
                               f"{sum(r['kind'] == k for r in cams)}" for k in SPEEDS},
        "camera_confusions": sorted({f"{r['clip']} -> {r['camera']}" for r in cams if r["camera"] != r["kind"]}),
        "cpu_ms_per_frame": cost_per_frame(clips),
        "stage": stage_cost(clips, out),
        "stage_cheaper": stage_cost(clips, out, every=10, text_every=90),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    c = summary["cpu"]
    print(f"CPU: {c['model']}, {c['cores']} cores, {', '.join(c['flags'])}; git {summary['git']}")
    print(f"subtitle frames scored as text (every frame): {summary['subtitle_frames_scored_as_text']:.1%} "
          f"(lowest clip {summary['subtitle_clips_min_share']:.1%}) over {len(subs)} clips")
    print(f"corner logo: text_share {summary['logo_text_share_every_frame_max']} (every frame), "
          f"{summary['logo_text_share_defaults_max']} (defaults); text_area at most "
          f"{summary['logo_text_area_every_frame_max']:.4f} (text_min_area {DEFAULTS['text_min_area']})")
    print(f"sharpness: blurred (gblur sigma 6) at most {summary['sharpness_blurred_max']}, every other clip "
          f"at least {summary['sharpness_unblurred_min']}; exposure: dark at most "
          f"{summary['exposure_dark_max']}, bright at least {summary['exposure_bright_min']}, plain "
          f"{summary['exposure_plain_range']}")
    print("| camera | right |\n|---|---|")
    for k, v in summary["camera_accuracy"].items():
        print(f"| {k} | {v} |")
    for x in summary["camera_confusions"]:
        print("  wrong:", x)
    print("| score | CPU-ms per frame |\n|---|---|")
    for k, v in summary["cpu_ms_per_frame"].items():
        print(f"| {k} | {v} |")
    for key in ("stage", "stage_cheaper"):
        s = summary[key]
        print(f"quality stage ({s['settings']}) on {s['clips']} clips: {s['cpu_s']} CPU-s "
              f"({s['cpu_ms_per_clip']} CPU-ms a clip), {s['wall_s']} s wall")


if __name__ == "__main__":
    main()
