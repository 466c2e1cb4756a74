"""Helpers shared by the bench/ scripts (not part of the pipeline)."""

from __future__ import annotations

import csv
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("YOLO_OFFLINE", "1")

from microg4m.formats import manifest as mf  # noqa: E402


def git_rev() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return ""


def timed(fn, *a):
    """(wall seconds, process CPU seconds incl. all threads, result)."""
    t, c = time.perf_counter(), time.process_time()
    out = fn(*a)
    return time.perf_counter() - t, time.process_time() - c, out


def peak_rss_mib() -> float:
    """Peak resident set size of this process's own address space (``VmHWM``), in MiB.

    Not ``getrusage``'s ``ru_maxrss`` where ``/proc`` has it: after fork + exec that also
    counts the parent's peak at the fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def subset_manifest(manifest: Path, n: int, folder: Path) -> Path:
    """``manifest`` itself when it has at most ``n`` ok clips, else a manifest of its first ``n``
    ok clips in ``folder`` (the clips linked, not copied)."""
    ok = mf.ok_clips(manifest)
    if len(ok) <= n:
        return manifest
    folder.mkdir(parents=True, exist_ok=True)
    for c in ok["clip_id"][:n]:
        os.symlink(mf.clip_file(manifest, c).resolve(), folder / f"{c}.mp4")
    out = folder / "manifest.tsv"
    mf.write_manifest(out, ok.head(n).to_dict("records"))
    return out


def raw_predict(model, frames, *, batch: int, imgsz: int = 640, conf: float = 0.1, device: str = "cpu",
                half: bool = False) -> int:
    """Batched ``model.predict`` on frames already in memory, person class, boxes copied to numpy
    (the ceiling of the detect stage: no decoding, no writing). Returns the number of frames."""
    kw = dict(imgsz=imgsz, conf=conf, classes=[0], device=device, quantize=16 if half else None, verbose=False)
    for i in range(0, len(frames), batch):
        for r in model.predict(frames[i:i + batch], batch=batch, **kw):
            r.boxes.xyxy.cpu().numpy()
    return len(frames)


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
