"""``results/download/settings.json``: the download settings that change how sources are
fetched, not what is fetched.

A download's bytes depend on its url, its clip type and ``download.format`` only; these
are the download rule's params, so that editing one of them fetches again. Everything
else (cookies, PO tokens, player clients, impersonation, sleeps, rate limit, proxy,
timeouts, retries) decides whether and how fast a fetch succeeds: adding cookies after a
bot check, or a sleep after a rate limit, must not run any download job again (each
would rewrite its status table and so re-run trim, detect and all after them). They are
written to this file by the ``download_settings`` rule whenever they change, and every
download job reads it as an input whose modification time does not count
(``ancient``); the versions rule reads it to check the YouTube set-up with them.
"""

from __future__ import annotations

import json
import os

from microg4m.common import faults
from microg4m.common.atomic import write_text

FETCHED = ("format",)  # the settings that change the bytes fetched (besides url and clip type)


def transport(download: dict) -> dict:
    """The settings of config key ``download`` that do not change the bytes fetched."""
    return {k: v for k, v in download.items() if k not in FETCHED}


def fetched(download: dict) -> dict:
    """The settings of config key ``download`` that change the bytes fetched."""
    return {k: download[k] for k in FETCHED if k in download}


def write(path: str | os.PathLike, settings: dict) -> None:
    write_text(path, json.dumps(settings, indent=1, sort_keys=True) + "\n")


def read(path: str | os.PathLike) -> dict:
    """The settings written by :func:`write`; ValueError naming the file if it is not that."""
    try:
        settings = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
        raise ValueError(f"{path}: cannot read the download settings ({exc})") from None
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: not the download settings (a JSON object)")
    return settings
