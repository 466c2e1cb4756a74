"""The versions of the tools that shape the outputs, for the Snakemake report.

ffmpeg above all: the clips (bytes and frame counts), and so the detections, depend on
the ffmpeg binary (see media.py). The table is written by the ``versions`` rule inside
the jobs' environment, so it shows what the jobs ran with, and with the YouTube set-up
checked against the download settings of the run (a missing cookies file is named).

The rule runs again when what the table says can have changed: its params hold
:func:`installed` (each package's version as installed, and the ffmpeg binary's path,
size and modification time: cheap to read while Snakemake builds the DAG, nothing
imported or run), and it reads the download settings.
"""

from __future__ import annotations

import os
import platform
import shutil
from importlib import metadata

import pandas as pd

from microg4m import __version__
from microg4m.common.atomic import write_tsv
from microg4m.engines import ytdlp_options

# Python packages whose version can change an output (decoding, detection, tracking, download).
PACKAGES = ("imageio-ffmpeg", "opencv-python", "torch", "ultralytics", "boxmot", "scenedetect",
            "pandas", "pyarrow", "snakemake")
# ... and those behind the YouTube rows (ytdlp_options.versions)
YOUTUBE_PACKAGES = ("yt-dlp", "yt-dlp-ejs", "deno", ytdlp_options.POT_PLUGIN, "curl-cffi")


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def installed(ffmpeg: str | None = None) -> dict:
    """What the table depends on, without running anything: every package's installed
    version, microg4m's, and the ffmpeg binary (``ffmpeg``: the config key) by path, size
    and modification time."""
    stamp = {name: _version(name) for name in (*PACKAGES, *YOUTUBE_PACKAGES)}
    stamp["microg4m"] = __version__
    if ffmpeg:
        exe = shutil.which(str(ffmpeg))
    else:
        import imageio_ffmpeg

        exe = imageio_ffmpeg.get_ffmpeg_exe()
    try:
        st = os.stat(exe) if exe else None
    except OSError:
        st = None
    stamp["ffmpeg"] = f"{exe} {st.st_size} {st.st_mtime_ns}" if st else f"{ffmpeg}: not found"
    return stamp


def collect(download: dict | None = None) -> list[tuple[str, str]]:
    """(tool, version) rows; the ffmpeg row is the first line of the binary's ``-version``;
    the last row is the YouTube set-up checked with the download settings ``download``."""
    from microg4m.common import media

    rows = [("ffmpeg", media.ffmpeg_version()), ("microg4m", __version__), ("python", platform.python_version())]
    rows += [(name, _version(name)) for name in PACKAGES]
    # yt-dlp with what today's YouTube needs: EJS, the JS runtime, and the check's verdict
    rows += ytdlp_options.versions()
    rows.append(("yt-dlp set-up", "; ".join(ytdlp_options.problems(download)) or "ready for YouTube"))
    return rows


def run(out: str | os.PathLike, download: dict | None = None) -> None:
    write_tsv(out, pd.DataFrame(collect(download), columns=["tool", "version"]))
