"""Glue for the thin Snakemake scripts: logging into the rule's log file, the ffmpeg in use."""

from __future__ import annotations

import logging
import sys


def _to_terminal_too(kind, exc, tb) -> None:
    """The error that ends a job goes to its log and, in one line, to the terminal (where
    Snakemake shows it beside the failed rule): a fault of the machine (a full disk) may
    leave the log itself unwritable."""
    try:
        sys.__excepthook__(kind, exc, tb)
    except OSError:
        pass
    if sys.__stderr__ is not None:
        sys.__stderr__.write(f"{kind.__name__}: {exc}\n")
        sys.__stderr__.flush()


def start(snakemake) -> None:
    """Send logging and stderr of this job to its ``log:`` file."""
    if snakemake.log:
        stream = open(snakemake.log[0], "w", encoding="utf-8", buffering=1)
        sys.stderr = stream
        sys.excepthook = _to_terminal_too
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
