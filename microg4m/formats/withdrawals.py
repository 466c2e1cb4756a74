"""``annotations/withdrawn.tsv``: sources withdrawn from the dataset's releases (an owner
asked, a video was taken down), with the date and the reason. The release leaves every
clip of such a source out of every file and names the source in ``CHANGES.md``.

Columns ``source_id, date, reason`` (tab-separated, a header line; ``#`` lines are
comments); the date is ``YYYY-MM-DD``. A missing file means no withdrawal; a bad row stops
the release, naming the line (a withdrawal must never be skipped).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from microg4m.formats.source_rows import read_source_rows

COLUMNS = ["source_id", "date", "reason"]


def read_withdrawn(path: str | os.PathLike | None) -> dict[str, dict]:
    """Source id -> ``{"date", "reason", "line"}``; ``{}`` for None or a missing file."""
    if path is None or not Path(path).is_file():
        return {}
    rows = read_source_rows(path, COLUMNS, "withdrawals")
    bad = []
    for r in rows:
        try:
            dt.date.fromisoformat(r["date"])
        except ValueError:
            bad.append(f"line {r['line']}: date {r['date']!r} is not YYYY-MM-DD")
    if bad:
        raise ValueError(f"withdrawals {path}: " + "; ".join(bad))
    return {r["source_id"]: {"date": r["date"], "reason": r["reason"], "line": r["line"]} for r in rows}
