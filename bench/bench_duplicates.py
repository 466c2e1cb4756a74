"""Benchmark of the near-duplicate stages (not run in CI).

  signature  seconds per clip of signatures.run (decode + letterbox cut + pHash of the
             frames and their mirrors, every 0.1 s) on 3-s, 30 fps clips that the trim
             stage cuts from package footage (dancer, pianist, vtest, bikes), on this
             machine's CPU; best of --repeats;
  match      seconds of duplicates.run over N clips (20 per signature file, as with
             sources_per_job 1 and 20 kept clips per source): the first run (every clip
             compared, through the index) and the run after one more file of 20 clips
             (only those compared; the cache holds the rest), with the peak memory and the
             share of the planted copies found. The clips are synthetic: 30 frames of
             random 64-bit hashes drifting 3 bits per frame, 5 % of them copies of another
             clip with 8 bits of noise per frame (a 10 % crop gives 8 on real footage).

    .venv/bin/python bench/bench_duplicates.py                     # 10^3 and 10^4 clips
    .venv/bin/python bench/bench_duplicates.py --clips 1000 10000 100000

Prints a table and writes bench/out/duplicates.csv. Wall and CPU seconds are both given:
on a shared machine a process may be paused or wait for a core (the CPU seconds of this
single-threaded stage are then the figure to read).
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from common import REPO, git_rev, peak_rss_mib, timed, write_csv  # noqa: F401  (sets sys.path)

from microg4m.stages import duplicates, signatures, trim
from microg4m.common import footage, media  # noqa: E402
from microg4m.formats.duplicates import read_pairs

SEGMENTS = {"dancer": (0, 30), "pianist": (10, 30), "vtest": (0, 30), "bikes": (0, 9)}  # footage: start, seconds
CLIPS_PER_FILE = 20
FRAMES = 30  # 3 s every 0.1 s


def make_clips(folder: Path) -> list[tuple[Path, Path]]:
    """(manifest, decisions) of trimmed package footage, every clip kept."""
    out = []
    for name, (start, seconds) in SEGMENTS.items():
        src = folder / "videos" / f"{name}.mp4"
        src.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([media.ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-ss", str(start), "-i",
                        str(footage.footage(name)), "-t", str(seconds), "-an", "-c:v", "libx264", "-preset",
                        "veryfast", str(src)], check=True)
        table = folder / "download" / f"{name}.tsv"
        table.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame([{"source_id": name, "clip_type": "r", "status": "ok", "path": str(src.resolve()),
                       "reason": ""}]).to_csv(table, sep="\t", index=False)
        manifest = folder / "clips" / name / "manifest.tsv"
        trim.run(table, manifest, manifest.parent / "status.tsv")
        m = pd.read_csv(manifest, sep="\t")
        decisions = folder / "filter" / f"{name}.tsv"
        decisions.parent.mkdir(parents=True, exist_ok=True)
        m[m.status == "ok"].assign(keep=1)[["clip_id", "keep"]].to_csv(decisions, sep="\t", index=False)
        out.append((manifest, decisions))
    return out


def bench_signatures(folder: Path, repeats: int) -> dict:
    units = make_clips(folder)
    n = sum(len(pd.read_csv(d, sep="\t")) for _, d in units)
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        wall = cpu = 0.0
        for manifest, decisions in units:
            w, c, _ = timed(signatures.run, manifest, decisions, folder / "sig" / f"{manifest.parent.name}.parquet")
            wall, cpu = wall + w, cpu + c
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    sizes = sorted({f"{w}x{h}" for m, _ in units for w, h in pd.read_csv(m, sep="\t")[["width", "height"]].values})
    return {"what": "signature", "clips": n, "frame sizes": " ".join(sizes),
            "s_per_clip": round(best_wall / n, 4), "cpu_s_per_clip": round(best_cpu / n, 4)}


def synthetic_files(folder: Path, n_clips: int, seed: int = 0) -> tuple[list[Path], set[tuple[str, str]]]:
    """Signature files of ``n_clips`` synthetic clips (CLIPS_PER_FILE per file, one source
    per clip) and the planted copy pairs."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 2**63, n_clips, dtype=np.int64).view(np.uint64) ^ (
        rng.integers(0, 2, n_clips).astype(np.uint64) << np.uint64(63))
    h = np.empty((n_clips, FRAMES), np.uint64)
    h[:, 0] = start
    bit = np.uint64(1)
    for f in range(1, FRAMES):
        drift = np.zeros(n_clips, np.uint64)
        for _ in range(3):
            drift |= bit << rng.integers(0, 64, n_clips).astype(np.uint64)
        h[:, f] = h[:, f - 1] ^ drift
    n_copy = n_clips // 20
    chosen = rng.choice(n_clips, 2 * n_copy, replace=False)
    originals, copies = chosen[:n_copy], chosen[n_copy:]
    for o, c in zip(originals, copies):
        noise = np.zeros(FRAMES, np.uint64)
        for f in range(FRAMES):
            for b in rng.choice(64, 8, replace=False):
                noise[f] |= bit << np.uint64(b)
        h[c] = h[o] ^ noise
    ids = [f"c{i:06d}" for i in range(n_clips)]
    planted = {tuple(sorted((f"{ids[o]}_000", f"{ids[c]}_000"))) for o, c in zip(originals, copies)}
    mirror = h ^ np.uint64(0x5A5A5A5A5A5A5A5A)  # some other hash per frame (the copies are not mirrored)
    t = np.round((np.arange(FRAMES) + 0.5) * 0.1, 6)
    files = []
    for lo in range(0, n_clips, CLIPS_PER_FILE):
        rows = slice(lo, min(lo + CLIPS_PER_FILE, n_clips))
        k = rows.stop - rows.start
        table = pd.DataFrame({
            "clip_id": np.repeat([f"{i}_000" for i in ids[rows]], FRAMES),
            "source_id": np.repeat(ids[rows], FRAMES),
            "t_s": np.tile(t, k),
            "hash": h[rows].ravel().view(np.int64),
            "mirror": mirror[rows].ravel().view(np.int64),
            "informative": True,
        })
        path = folder / f"unit{lo // CLIPS_PER_FILE:05d}.parquet"
        signatures.write_signatures(path, table)
        files.append(path)
    return files, planted


def bench_match(folder: Path, n_clips: int) -> dict:
    files, planted = synthetic_files(folder / f"n{n_clips}", n_clips + CLIPS_PER_FILE)
    first, added = files[:-1], files
    cache, out = folder / f"cache{n_clips}", folder / f"pairs{n_clips}.tsv"
    wall, cpu, s1 = timed(lambda: duplicates.run(first, out, cache_dir=cache))
    wall_add, cpu_add, s2 = timed(lambda: duplicates.run(added, out, cache_dir=cache))
    pairs = read_pairs(out)
    found = set(zip(pairs.clip_a, pairs.clip_b))
    return {"what": "match", "clips": n_clips, "first_run_s": round(wall, 2), "first_run_cpu_s": round(cpu, 2),
            "add_20_clips_s": round(wall_add, 2), "add_20_clips_cpu_s": round(cpu_add, 2), "compared_then": s2["compared"],
            "planted_found": f"{len(planted & found)}/{len(planted)}", "other_pairs": len(found - planted),
            "peak_rss_mib": round(peak_rss_mib())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "duplicates.csv"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_dups_"))
    try:
        rows = [bench_signatures(work / "sig", args.repeats)]
        print(rows[-1], flush=True)
        for n in args.clips:
            rows.append(bench_match(work, n))
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta = {"rev": git_rev(), "cpu": platform.processor() or platform.machine(), "date": time.strftime("%Y-%m-%d")}
    write_csv(Path(args.out), [{**meta, **r} for r in rows])
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    sys.exit(main())
