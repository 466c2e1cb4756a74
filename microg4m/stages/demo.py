"""The built-in offline demo: short test videos made from footage shipped in packages.

Each recipe turns package footage (see microg4m.common.footage) into one demo source video.
Together they cover the cases the pipeline must handle: one person, two people, a
hard scene cut, no person at all, a source shorter than 3 s, a 25 fps source, a film.
"""

from __future__ import annotations

import os
from pathlib import Path

from microg4m.common.atomic import atomic_path
from microg4m.common.footage import footage

H264 = ["-an", "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p"]
FIT_640x480 = "scale=640:480:force_original_aspect_ratio=decrease,pad=640:480:(ow-iw)/2:(oh-ih)/2,setsar=1"


def _dancer() -> list[str]:  # one person moving, 25 fps source -> 3 clips
    return ["-i", str(footage("dancer")), "-t", "9.5", *H264]


def _pianist() -> list[str]:  # one person, 30 fps -> 2 clips
    return ["-ss", "20", "-i", str(footage("pianist")), "-t", "7", "-vf", "scale=480:-2", *H264]


def _zidane() -> list[str]:  # two men, a slow zoom over a still -> 2 clips
    zoom = "scale=1280:720,zoompan=z='1+0.0008*on':x='iw/2-(iw/zoom/2)':y='ih/2-(ih/zoom/2)':d=1:s=640x360:fps=30"
    return ["-loop", "1", "-framerate", "30", "-i", str(footage("zidane")), "-t", "6.5", "-vf", zoom, *H264]


def _carphone() -> list[str]:  # a man in a car, 176x144 at 29.97 fps (used as the demo "film")
    return ["-i", str(footage("carphone")), *H264]


def _scenecut() -> list[str]:  # dancer for 4.5 s, then a hard cut to the pianist -> cut at frame 46 of clip 001
    graph = (f"[0:v]{FIT_640x480},fps=30,trim=0:4.5,setpts=PTS-STARTPTS[a];"
             f"[1:v]{FIT_640x480},fps=30,trim=0:2,setpts=PTS-STARTPTS[b];[a][b]concat=n=2:v=1[v]")
    return ["-i", str(footage("dancer")), "-ss", "30", "-i", str(footage("pianist")),
            "-filter_complex", graph, "-map", "[v]", *H264]


def _noperson() -> list[str]:  # a fractal zoom: no person -> 1 clip rejected as few_persons
    return ["-f", "lavfi", "-i", "mandelbrot=size=320x240:rate=30", "-t", "3.5", *H264]


def _short() -> list[str]:  # 2 s: zero clips, not an error
    return ["-ss", "40", "-i", str(footage("pianist")), "-t", "2", "-vf", "scale=320:-2", *H264]


RECIPES = {
    "dancer": _dancer,
    "pianist": _pianist,
    "zidane": _zidane,
    "carphone": _carphone,
    "scenecut": _scenecut,
    "noperson": _noperson,
    "short": _short,
}


def made_here(path: str | os.PathLike) -> bool:
    """Whether a sources table's local file is one of the demo videos the workflow makes
    (``resources/demo/{name}.mp4``, rule demo_media), not a file of the user's."""
    path = Path(path)
    return path.parent.as_posix() == "resources/demo" and path.stem in RECIPES


def make(name: str, out: str | os.PathLike) -> Path:
    """Write demo video ``name`` to ``out`` (mp4)."""
    if name not in RECIPES:
        raise ValueError(f"unknown demo video {name!r}; known: {', '.join(RECIPES)}")
    out = Path(out)
    with atomic_path(out, suffix=".mp4") as tmp:
        from microg4m.common import media  # here: the workflow reads RECIPES without cv2

        media.run_ffmpeg([*RECIPES[name](), "-f", "mp4", str(tmp)], what=f"demo video {name}")
    return out
