"""Glue for the thin Snakemake scripts: logging into the rule's log file, the ffmpeg in use."""

from __future__ import annotations

import logging
import sys


def start(snakemake) -> None:
    """Send logging and stderr of this job to its ``log:`` file."""
    if snakemake.log:
        stream = open(snakemake.log[0], "w", encoding="utf-8", buffering=1)
        sys.stderr = stream
        handler = logging.StreamHandler(stream)
    else:
        handler = logging.StreamHandler()
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    params = getattr(snakemake, "params", None)
    if params is not None and hasattr(params, "ffmpeg"):
        from microg4m.common import media

        exe = media.use_ffmpeg(params.ffmpeg)
        logging.getLogger("microg4m").info("ffmpeg: %s (%s)", exe, media.ffmpeg_version())
