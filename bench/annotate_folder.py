"""A results folder of the paper's shape for bench_annotate.py (not part of the pipeline).

MicroG-4M's labels cover 4,759 clips; this builds that many kept clips (or any number) in
``units`` per-unit folders, as a workflow run leaves them, with the package's own writers:

* a few real clips, 3 s / 30 fps / at most 480 lines, cut with ffmpeg from the package
  footage of people (vtest, pianist, dancer, bikes, carphone); every clip of the folder is
  a hard link to one of them (``clips/{unit}/{clip}.mp4``), so the server decodes real
  H.264 and the folder takes no more disk than the few clips;
* ``results/units.tsv`` (formats.unit_plan.write_plan), per unit ``clips/{unit}/manifest.tsv``
  (formats.manifest.write_manifest), ``filter/{unit}.tsv`` (the filter stage's columns:
  the kept clips, ~15 % rejected for few persons or a cut, ~1 % screened by hand, which the
  page also lists), ``tracks/{unit}.csv`` (the track stage's ``to_frame`` and writer: 1-5
  persons per clip, each on a run of frames, a box on every frame of it) and, for one
  unit in ten, ``corrected/{unit}.csv`` (the CVAT corrections applied);
* with ``jpeg_frames``: the export's JPEG frames ``frames/<clip>/<clip>_%06d.jpg`` (the
  frames stage's extraction of each real clip, hard-linked under every clip's name) and
  the stage's done list ``frames/{unit}.tsv``.

The same arguments give the same folder (seeded); ``build`` reuses a folder whose
``bench_build.json`` records the same arguments.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pandas as pd

from microg4m.common import footage, media
from microg4m.common.atomic import write_csv, write_tsv
from microg4m.common.units import make_units
from microg4m.formats.frame_lists import FRAME_TMPL
from microg4m.formats.manifest import clip_id, write_manifest
from microg4m.formats.scenes import format_cuts
from microg4m.formats.unit_plan import write_plan
from microg4m.stages import filter as filter_stage
from microg4m.stages import frames as frames_stage
from microg4m.stages.track import to_frame

# (footage, start second): 3-second excerpts with people in them
EXCERPTS = [("vtest", 0), ("vtest", 30), ("pianist", 10), ("pianist", 50), ("dancer", 5), ("dancer", 40),
            ("bikes", 2), ("carphone", 0)]
PERSONS = [1, 2, 3, 4, 5]
PERSON_WEIGHTS = [0.45, 0.25, 0.15, 0.10, 0.05]  # persons per clip: most clips show one astronaut
MOVIE_SHARE = 0.1  # sources that are films (clip_type m)
REJECTED_SHARE = 0.15  # manifest clips the filter rejected (not on the page)
SCREENED_SHARE = 0.01  # clips excluded by hand (on the page as "screened"), beyond the kept ones
FRAMES = 90


def real_clips(folder: Path) -> list[dict]:
    """The real 3-second clips (made once): path, width, height."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, start in EXCERPTS:
        path = folder / f"{name}_{start:03d}.mp4"
        if not path.is_file():
            tmp = path.with_suffix(".tmp.mp4")
            media.run_ffmpeg(["-ss", str(start), "-i", str(footage.footage(name)), "-t", "3", "-map", "0:v:0",
                              "-an", "-vf", "fps=30,scale=-2:'min(480,ih)'", "-c:v", "libx264", "-preset",
                              "veryfast", "-crf", "23", "-pix_fmt", "yuv420p", str(tmp)], str(path))
            os.replace(tmp, path)
        info = media.probe(path)
        n = media.count_frames(path)
        if n != FRAMES:
            raise RuntimeError(f"{path}: {n} frames, expected {FRAMES}")
        out.append({"path": path, "width": info.width, "height": info.height})
    return out


def _boxes(rng: random.Random, clip: str, persons: int, width: int, height: int) -> list[tuple]:
    """Track rows of one clip: each person on a run of frames, a slowly moving box."""
    rows = []
    for p in range(1, persons + 1):
        first = rng.randint(1, 40)
        last = rng.randint(max(first + 10, 60), FRAMES)
        w, h = rng.uniform(0.15, 0.4) * width, rng.uniform(0.3, 0.8) * height
        x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
        dx, dy = rng.uniform(-1, 1), rng.uniform(-0.5, 0.5)
        conf = rng.uniform(0.6, 0.95)
        for f in range(first, last + 1):
            x = min(max(0.0, x + dx), width - w)
            y = min(max(0.0, y + dy), height - h)
            rows.append((clip, f, p, x, y, x + w, y + h, conf))
    return rows


def _link(src: Path, dst: Path) -> None:
    if dst.exists():
        dst.unlink()
    os.link(src, dst)


def build(root: Path, clips: int, units: int, sources_per_unit: int, work: Path, jpeg_frames: bool = False,
          seed: int = 42) -> dict:
    """Build (or reuse) the results folder ``root``; returns its description."""
    args = {"clips": clips, "units": units, "sources_per_unit": sources_per_unit, "jpeg_frames": jpeg_frames,
            "seed": seed, "version": 2}
    root, work = Path(root).resolve(), Path(work).resolve()  # the server runs in another folder
    stamp = root / "bench_build.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("args") == args:
        return {**json.loads(stamp.read_text()), "root": str(root)}  # the folder may have been moved
    if root.exists():
        shutil.rmtree(root)
    rng = random.Random(seed)
    real = real_clips(work / "real-clips")
    source_ids = [f"src{i:05d}" for i in range(units * sources_per_unit)]
    plan = make_units(source_ids, sources_per_unit)
    write_plan(root / "units.tsv", plan)
    # kept clips per source, as even as the numbers allow
    per_source = [clips // len(source_ids) + (i < clips % len(source_ids)) for i in range(len(source_ids))]
    index = {sid: i for i, sid in enumerate(source_ids)}
    exported = {}
    if jpeg_frames:  # the frames stage's JPEGs of each real clip, linked under every clip's name
        for r in real:
            frames_stage.extract_clip(r["path"], work / "real-frames", r["path"].stem, FRAMES, jpeg_quality=2)
            exported[r["path"]] = work / "real-frames" / r["path"].stem
    n_kept = n_screened = n_persons = 0
    for unit, sids in plan.items():
        folder = root / "clips" / unit
        folder.mkdir(parents=True)
        manifest, decisions, tracks, done = [], [], [], []
        for sid in sids:
            ctype = "m" if rng.random() < MOVIE_SHARE else "r"
            kept = per_source[index[sid]]
            kinds = ["kept"] * kept + ["screened"] * int(kept * SCREENED_SHARE + rng.random()) + \
                ["rejected"] * round(kept * REJECTED_SHARE)
            rng.shuffle(kinds)
            for seq, kind in enumerate(kinds):
                cid = clip_id(sid, seq)
                r = real[rng.randrange(len(real))]
                _link(r["path"], folder / f"{cid}.mp4")
                manifest.append(dict(clip_id=cid, source_id=sid, clip_type=ctype, seq=seq, start_s=3 * seq,
                                     frames=FRAMES, width=r["width"], height=r["height"], status="ok", reason=""))
                if kind == "rejected":
                    reason = rng.choice(["few_persons", "few_persons", "scene_cut"])
                    cuts = [rng.randint(10, 80)] if reason == "scene_cut" else []
                    decisions.append([cid, rng.uniform(0, 0.59), cuts, False, reason, FRAMES])
                    continue
                screened = kind == "screened"
                n_screened += screened
                n_kept += not screened
                decisions.append([cid, rng.uniform(0.6, 1.0), [], not screened, "screened" if screened else "kept",
                                  FRAMES])
                if screened:
                    continue  # the track stage tracks kept clips only
                persons = rng.choices(PERSONS, PERSON_WEIGHTS)[0]
                n_persons += persons
                tracks += _boxes(rng, cid, persons, r["width"], r["height"])
                if jpeg_frames:
                    dst = root / "frames" / unit / cid  # the frames stage's layout: frames/<unit>/<clip>/
                    dst.mkdir(parents=True)
                    src = exported[r["path"]]
                    for n in range(1, FRAMES + 1):
                        os.link(src / FRAME_TMPL.format(clip=src.name, n=n), dst / FRAME_TMPL.format(clip=cid, n=n))
                    done.append([cid, FRAMES, "ok", "", f"{unit}/{cid}"])
        write_manifest(folder / "manifest.tsv", manifest)
        table = pd.DataFrame(decisions, columns=filter_stage.COLUMNS)
        write_tsv(root / "filter" / f"{unit}.tsv", table.assign(
            person_share=table["person_share"].map(lambda x: f"{x:.4f}"), cuts=table["cuts"].map(format_cuts),
            keep=table["keep"].astype(int)))
        if jpeg_frames:  # the frames stage's done list of the unit
            write_tsv(root / "frames" / f"{unit}.tsv", pd.DataFrame(done, columns=frames_stage.DONE_COLUMNS))
        frame = to_frame(tracks, "integer")
        write_csv(root / "tracks" / f"{unit}.csv", frame)
        if rng.random() < 0.1:  # the CVAT corrections of this unit applied
            write_csv(root / "corrected" / f"{unit}.csv", frame)
    out = {"args": args, "root": str(root), "kept": n_kept, "screened": n_screened, "persons": n_persons,
           "units": len(plan), "sources": len(source_ids), "real_clips": [str(r["path"]) for r in real]}
    stamp.write_text(json.dumps(out, indent=1))
    return out
