"""Download settings stage: write the transport settings (microg4m.formats.download_settings)
that every download job reads without being re-run when they change."""

from __future__ import annotations

import logging
import os

from microg4m.formats import download_settings


def run(out: str | os.PathLike, **settings) -> None:
    download_settings.write(out, settings)
    logging.getLogger(__name__).info("download settings: %s", settings)
