"""Glue for the thin Snakemake scripts: logging into the rule's log file."""

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
