"""Small hand-written tables keyed by source id (``annotations/withdrawn.tsv``,
``annotations/licences.tsv``): one strict reader, so that a bad row is named with its file,
line and reason, and never skipped (a withdrawal that was not read would be published)."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

from microg4m.common import faults

SOURCE_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def read_source_rows(path: str | os.PathLike, columns: list[str], what: str) -> list[dict]:
    """The rows of a TSV with a header holding ``columns`` (``source_id`` first; more
    columns are allowed), blank lines and ``#`` comment lines ignored. Each row is a dict of
    the columns (stripped) with its ``line``. ValueError naming every bad row: a source id
    outside ``[A-Za-z0-9_-]``, a missing cell, a source given twice."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
        raise ValueError(f"{what} {path}: cannot read it ({exc})") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ValueError(f"{what} {path}: empty; it needs the header line {chr(9).join(columns)}")
    header = [c.strip() for c in lines[0][1].split("\t")]
    missing = [c for c in columns if c not in header]
    if missing:
        raise ValueError(f"{what} {path}: line {lines[0][0]}: the header lacks {', '.join(missing)} "
                         f"(expected {chr(9).join(columns)}, tab-separated)")
    rows, problems, seen = [], [], {}
    for n, line in lines[1:]:
        cells = next(csv.reader([line], delimiter="\t"))
        row = {c: (cells[header.index(c)].strip() if header.index(c) < len(cells) else "") for c in columns}
        empty = [c for c in columns if not row[c]]
        sid = row["source_id"]
        if empty:
            problems.append(f"line {n}: empty {', '.join(empty)}")
        elif not SOURCE_ID.match(sid):
            problems.append(f"line {n}: source_id {sid!r} has characters outside [A-Za-z0-9_-]")
        elif sid in seen:
            problems.append(f"line {n}: source {sid} is also on line {seen[sid]}")
        else:
            seen[sid] = n
            rows.append(row | {"line": n})
    if problems:
        raise ValueError(f"{what} {path}: " + "; ".join(problems))
    return rows
