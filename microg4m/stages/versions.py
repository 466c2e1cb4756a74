"""The versions of the tools that shape the outputs, for the Snakemake report.

ffmpeg above all: the clips (bytes and frame counts), and so the detections, depend on
the ffmpeg binary (see media.py). The table is written by the ``versions`` rule inside
the jobs' environment, so it shows what the jobs ran with.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata

import pandas as pd

from microg4m import __version__
from microg4m.common import media
from microg4m.engines import ytdlp_options
from microg4m.common.atomic import write_tsv

# Python packages whose version can change an output (decoding, detection, tracking, download).
PACKAGES = ("imageio-ffmpeg", "opencv-python", "torch", "ultralytics", "boxmot", "scenedetect",
            "pandas", "pyarrow", "snakemake")


def collect() -> list[tuple[str, str]]:
    """(tool, version) rows; the ffmpeg row is the first line of the binary's ``-version``."""
    rows = [("ffmpeg", media.ffmpeg_version()), ("microg4m", __version__), ("python", platform.python_version())]
    for name in PACKAGES:
        try:
            rows.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            rows.append((name, "not installed"))
    # yt-dlp with what today's YouTube needs: EJS, the JS runtime, and the check's verdict
    rows += ytdlp_options.versions()
    rows.append(("yt-dlp set-up", "; ".join(ytdlp_options.problems()) or "ready for YouTube"))
    return rows


def run(out: str | os.PathLike) -> None:
    write_tsv(out, pd.DataFrame(collect(), columns=["tool", "version"]))
