"""Which sources' clips the release may carry as video files (``release.videos``).

``auto`` decides per source from its licence: the licences table written by hand
(``annotations/licences.tsv``) when it names the source, else the download record's
``license`` (what yt-dlp reported; a YouTube video without one is "standard YouTube
licence"); the clips of a source whose licence matches one of ``release.redistributable``
(case-insensitive regular expressions; by default Creative Commons BY and BY-SA, CC0 and
the public domain) are carried, the others as ids and URLs only. ``true``: every source
(the authors answer for the rights); ``false``: none.
"""

from __future__ import annotations

import re

import pandas as pd

NOT_REPORTED = "not reported"
FROM_RECORD, FROM_TABLE, FROM_NOWHERE = "download record", "licences table", "none"
MODES = ("auto", True, False)


def check_mode(mode) -> None:
    if mode not in MODES:
        raise ValueError(f"release.videos must be auto, true or false, got {mode!r}")


def compile_patterns(patterns) -> list[re.Pattern]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p, re.IGNORECASE))
        except re.error as exc:
            raise ValueError(f"release.redistributable: {p!r} is no regular expression ({exc})") from None
    return out


def decide(sources: pd.DataFrame, *, mode, patterns, by_hand: dict[str, str]) -> pd.DataFrame:
    """``sources`` (``source_id, license``) -> ``source_id, license, license_from, videos``."""
    check_mode(mode)
    rx = compile_patterns(patterns)
    rows = []
    for sid, recorded in zip(sources["source_id"], sources["license"]):
        if sid in by_hand:
            licence, origin = by_hand[sid], FROM_TABLE
        elif str(recorded or "").strip():
            licence, origin = str(recorded).strip(), FROM_RECORD
        else:
            licence, origin = NOT_REPORTED, FROM_NOWHERE
        if mode == "auto":
            videos = origin != FROM_NOWHERE and any(r.search(licence) for r in rx)
        else:
            videos = bool(mode)
        rows.append((sid, licence, origin, videos))
    return pd.DataFrame(rows, columns=["source_id", "license", "license_from", "videos"])
