"""``annotations/licences.tsv``: a source's licence recorded by hand, for sources whose
download record has none (local films) or understates it (an owner who granted more than
the platform shows). Columns ``source_id, license`` (tab-separated, a header line; ``#``
lines are comments). The release takes these before the download record's ``license``.
A missing file means none; a bad row stops the release, naming the line.
"""

from __future__ import annotations

import os
from pathlib import Path

from microg4m.formats.source_rows import read_source_rows

COLUMNS = ["source_id", "license"]


def read_licences(path: str | os.PathLike | None) -> dict[str, str]:
    """Source id -> licence text; ``{}`` for None or a missing file."""
    if path is None or not Path(path).is_file():
        return {}
    return {r["source_id"]: r["license"] for r in read_source_rows(path, COLUMNS, "licences")}
