"""Fidelity against the authors' own scripts: the same clips, decisions, motion levels,
persons, keyframes and boxes?

    export MICROG4M_MIRROR=<git dir of github lei-qi-233/MicroG-4M>   # the fetch tool gives it
    .venv/bin/python bench/bench_fidelity.py                 # footage built here (16 sources)
    .venv/bin/python bench/bench_fidelity.py --footage DIR   # a folder of .mp4 sources

1. Footage (16 sources, ~70 clips): the demo's sources; longer, other segments of the
   package footage; Debian opencv-doc's vtest.avi (pedestrians; also zoomed in, so that
   they are large enough to be tracked) and Megamind.avi (animated film, cuts); and
   camera motion made from real footage (pans over bus.jpg and zidane.jpg, a shaking
   crop over the dancer and the pianist) for high-motion clips, several persons, ids
   with gaps and close-ups.
2. The reference: ``../shared/tools/reference-oracle/run_reference.sh`` runs the authors'
   splitVideo -> filter -> trackPerson on that folder (their code, extracted at run time,
   never stored here) with the same weights (yolo11n-pose.pt).
3. microg4m: a real ``snakemake`` run on the same files with the paper's settings and the
   three settings that the comparison needs to see the same pixels: the ffmpeg the
   reference uses (the one on PATH: Debian's), ``trim.preset: medium`` (ffmpeg's
   default, which the reference uses; microg4m's default is veryfast) and
   ``trim.align: reference`` (the authors' ``-r 30`` frame picking; microg4m's default
   is exact, which picks other frames from sources above 30 fps, see issue 21).
4. ``compare.py`` of the oracle prints the agreement (its SUMMARY line is kept in
   ``bench/out/fidelity/summary.json``). A second run with ``trim.align: exact`` (in
   WORK/ours-exact, compared in WORK/exact) is reported beside it, under ``"exact"``
   in the summary; ``--reference-only`` skips it.
5. The filter's tracker runs without camera-motion compensation (it decodes no frame):
   this script also counts the person frames with compensation on the decoded frames and
   lists every clip whose decision would change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from microg4m.stages import demo
from microg4m.common import footage, media  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from oracle import ORACLE, compare  # noqa: E402

X264 = ["-an", "-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-pix_fmt", "yuv420p"]
OPENCV_DATA = Path("/usr/share/doc/opencv-doc/examples/data")
# extra sources: name -> ffmpeg input arguments (before the encoder)
EXTRA = {
    "dancerlong": lambda: ["-ss", "30", "-i", str(footage.footage("dancer")), "-t", "30"],
    "pianistlong": lambda: ["-ss", "40", "-i", str(footage.footage("pianist")), "-t", "30"],
    "vtest": lambda: ["-i", str(footage.footage("vtest")), "-t", "30"],
    "bikes": lambda: ["-i", str(footage.footage("bikes"))],
    "megamind": lambda: ["-i", str(OPENCV_DATA / "Megamind.avi")],
    "vtestzoom": lambda: ["-ss", "20", "-i", str(footage.footage("vtest")), "-t", "30",
                          "-vf", "crop=288:216:240:200,scale=640:480"],
    "buspan": lambda: ["-loop", "1", "-framerate", "30", "-i", str(footage.footage("bus")), "-t", "9.2",
                       "-vf", "crop=400:400:'t*120':300"],
    "zidanepan": lambda: ["-loop", "1", "-framerate", "30", "-i", str(footage.footage("zidane")), "-t", "9.2",
                          "-vf", "crop=640:480:'320+300*sin(t*1.5)':100"],
    "dancershake": lambda: ["-ss", "5", "-i", str(footage.footage("dancer")), "-t", "12.2",
                            "-vf", "crop=360:360:'79+79*sin(t*4)':'68+60*cos(t*3)',scale=480:480"],
    "pianistshake": lambda: ["-ss", "10", "-i", str(footage.footage("pianist")), "-t", "12.2",
                             "-vf", "crop=400:300:'120+110*sin(t*2.5)':'90+80*cos(t*2)',scale=640:480"],
}


def build_footage(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in demo.RECIPES:
        if name != "short" and not (folder / f"{name}.mp4").is_file():
            demo.make(name, folder / f"{name}.mp4")
    for name, args in EXTRA.items():
        if not (folder / f"{name}.mp4").is_file():
            media.run_ffmpeg([*args(), *X264, str(folder / f"{name}.mp4")], what=name)


def deep_update(base: dict, extra: dict) -> dict:
    """``base`` with ``extra``'s keys set, nested sections merged (as Snakemake merges --configfile)."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = value
    return base


def run_ours(footage_dir: Path, work: Path, ffmpeg: str, presets=(), align: str = "reference") -> Path:
    wd = work / ("ours" if align == "reference" else f"ours-{align}")
    if wd.exists():
        shutil.rmtree(wd)
    (wd / "config").mkdir(parents=True)
    shutil.copytree(REPO / "annotations", wd / "annotations")
    rows = ["source_id\turl\tclip_type"] + [f"{p.stem}\t{p.resolve()}\tr" for p in sorted(footage_dir.glob("*.mp4"))]
    (wd / "config" / "sources.tsv").write_text("\n".join(rows) + "\n")
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg["ffmpeg"] = ffmpeg
    cfg["trim"]["preset"] = "medium"
    cfg["trim"]["align"] = align  # reference: the authors' -r 30 command's frames
    cfg["export"]["frames"] = False
    for preset in presets:  # e.g. config/presets/fast.yaml
        deep_update(cfg, yaml.safe_load(Path(preset).read_text()))
    (wd / "config" / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = dict(os.environ, YOLO_OFFLINE="1")
    env.setdefault("YOLO_CONFIG_DIR", str(wd / ".yolo"))
    subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"), "-d", str(wd),
                    "--cores", "all", "--quiet", "rules"], check=True, env=env)
    return wd / "results"


def person_share_check(oracle: Path, res: Path) -> dict:
    """Our person share of every clip against the reference's person-frame percentage."""
    ref = pd.read_csv(oracle / "filter_decisions.csv")
    ref = dict(zip(ref["clip_id"], ref["person_frame_pct"]))
    ours = pd.concat([pd.read_csv(p, sep="\t", dtype={"clip_id": str}) for p in sorted(res.glob("filter/*.tsv"))])
    both = [(c, s) for c, s in zip(ours["clip_id"], ours["person_share"]) if c in ref]
    same = [c for c, s in both if abs(100 * s - ref[c]) < 0.01]  # ours has 4 decimals
    diff = {c: (round(100 * s, 2), round(ref[c], 2)) for c, s in both if c not in same}
    print(f"person share equal to the reference's on {len(same)} of {len(both)} clips; different: {diff}")
    return {"person_share_equal": len(same), "person_share_clips": len(both), "person_share_diff": diff}


def filter_cmc_check(res: Path) -> list[dict]:
    """Person frames of every ok clip with the filter's tracker with and without camera-motion
    compensation; the clips whose keep/reject would differ."""
    from microg4m.stages import filter as flt
    from microg4m.formats import manifest as mf
    from microg4m.engines import tracker as bot
    from microg4m.formats.detections import read_detections
    from microg4m.formats.results_index import ResultsIndex

    changed, clips_seen = [], 0
    settings = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["filter"]
    index = ResultsIndex(res)
    for unit in index.units():
        files = index.files(unit)
        manifest = files.manifest
        clips = mf.ok_clips(manifest)
        if not len(clips):
            continue
        dets = read_detections(files.detections)
        without = flt.tracked_boxes(dets, clips)
        by_clip = bot.by_frame(dets)
        for clip, frames, width, height in zip(clips["clip_id"], clips["frames"], clips["width"], clips["height"]):
            clips_seen += 1
            t = bot.model_track_default()
            with_cmc = [n for n, out in bot.run(t, media.iter_frames(mf.clip_file(manifest, clip)), by_clip.get(clip, {}),
                                               width=int(width), height=int(height))
                        if len(out) and ((out[:, 6] == 0) & (out[:, 5] > settings["person_conf"])).any()]
            w = without[(without.clip_id == clip) & (without.cls == 0) & (without.conf > settings["person_conf"])]
            a, b = len(set(w["frame"])) / frames, len(set(with_cmc)) / frames
            keep_a, keep_b = a + 1e-9 >= settings["min_person_share"], b + 1e-9 >= settings["min_person_share"]
            if keep_a != keep_b:
                changed.append({"clip_id": clip, "share_without": a, "share_with": b})
    print(f"filter without / with camera-motion compensation: {len(changed)} of {clips_seen} clips would change: {changed}")
    return changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--footage", type=Path, help="folder of .mp4 sources (default: build one under --work)")
    ap.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "fidelity")
    ap.add_argument("--ffmpeg", default=shutil.which("ffmpeg"), help="the ffmpeg the reference uses (PATH)")
    ap.add_argument("--skip-oracle", action="store_true", help="reuse WORK/oracle from an earlier run")
    ap.add_argument("--preset", action="append", default=[], type=Path,
                    help="a config overlay for our run, e.g. config/presets/fast.yaml (repeatable)")
    ap.add_argument("--reference-only", action="store_true",
                    help="skip the second run with trim.align: exact (reported beside the reference's)")
    a = ap.parse_args()
    work = a.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    footage_dir = (a.footage or work / "footage").resolve()
    if a.footage is None:
        build_footage(footage_dir)
    oracle = work / "oracle"
    if not a.skip_oracle:
        if not os.environ.get("MICROG4M_MIRROR"):
            sys.exit("set MICROG4M_MIRROR to a bare git copy of lei-qi-233/MicroG-4M (see the oracle's README)")
        subprocess.run(["bash", str(ORACLE / "run_reference.sh"), str(footage_dir), str(oracle)], check=True)
    res = run_ours(footage_dir, work, a.ffmpeg, a.preset)
    summary = compare(oracle, res, work)
    summary.update(person_share_check(oracle, res))
    summary["filter_cmc_changes"] = filter_cmc_check(res)
    if not a.reference_only:
        print("--- microg4m with trim.align: exact (the default), against the same reference ---")
        (work / "exact").mkdir(exist_ok=True)
        summary["exact"] = compare(oracle, run_ours(footage_dir, work, a.ffmpeg, a.preset, align="exact"), work / "exact")
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
