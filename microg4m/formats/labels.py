"""The action label map (``label_map.pbtxt``), the actions table and the human labels.

The label map keeps the released MicroG-4M layout that PySlowFast's and mmaction2's
``read_labelmap`` parse line by line (exactly two spaces before ``name:`` and ``id:``)::

    item {
      name: "bend/bow (at the waist)"
      id: 1
      label_type: PERSON_MOVEMENT
    }

Items are separated by a blank line; the released file has no final newline.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import pandas as pd

from microg4m.common import faults


LABEL_TYPES = ("PERSON_MOVEMENT", "OBJECT_MANIPULATION", "PERSON_INTERACTION")
ACTIONS_COLUMNS = ["video_id", "movie_or_real", "person_id", "action"]  # released actions.csv
TABLE_COLUMNS = ["id", "name", "label_type"]

_FIELD = re.compile(r"^  (name|id|label_type): (.*)$")


class LabelError(ValueError):
    """A label map or actions file that cannot be used; the message names the file and why."""


def read_label_map(path: str | os.PathLike) -> pd.DataFrame:
    """Parse a label map into ``DataFrame(id, name, label_type)`` in file order.

    Strict: every field line must have the two-space indent the training code needs,
    ids must be unique integers, names quoted and label types known.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
        raise LabelError(f"{path}: cannot read label map ({exc})") from None
    items: list[dict] = []
    cur: dict | None = None
    for no, line in enumerate(lines, 1):
        where = f"{path}:{no}"
        if not line.strip():
            continue
        if line == "item {":
            if cur is not None:
                raise LabelError(f"{where}: 'item {{' inside an unclosed item")
            cur = {"line": no}
        elif line == "}":
            if cur is None:
                raise LabelError(f"{where}: '}}' without 'item {{'")
            missing = [k for k in TABLE_COLUMNS if k not in cur]
            if missing:
                raise LabelError(f"{path}:{cur['line']}: item without {', '.join(missing)}")
            items.append(cur)
            cur = None
        else:
            m = _FIELD.match(line)
            if cur is None or not m:
                raise LabelError(f"{where}: unexpected line {line!r} (fields need exactly two leading spaces)")
            key, value = m.groups()
            if key in cur:
                raise LabelError(f"{where}: second {key} in one item")
            if key == "name":
                if not (len(value) >= 2 and value[0] == value[-1] == '"' and '"' not in value[1:-1]):
                    raise LabelError(f"{where}: name must be a double-quoted string, got {value}")
                value = value[1:-1]
            elif key == "id":
                if not value.isdigit() or int(value) < 1:
                    raise LabelError(f"{where}: id must be a positive integer, got {value!r}")
                value = int(value)
            elif value not in LABEL_TYPES:
                raise LabelError(f"{where}: unknown label_type {value!r} (expected one of {', '.join(LABEL_TYPES)})")
            cur[key] = value
    if cur is not None:
        raise LabelError(f"{path}:{cur['line']}: item is not closed")
    if not items:
        raise LabelError(f"{path}: no items")
    df = pd.DataFrame(items, columns=TABLE_COLUMNS)
    dup = df["id"][df["id"].duplicated()].tolist()
    if dup:
        raise LabelError(f"{path}: duplicate id(s) {dup}")
    return df.astype({"id": int}).reset_index(drop=True)


def format_label_map(df: pd.DataFrame) -> str:
    """The label map text (released layout, no final newline)."""
    items = [
        f'item {{\n  name: "{r.name}"\n  id: {int(r.id)}\n  label_type: {r.label_type}\n}}'
        for r in df[TABLE_COLUMNS].itertuples(index=False)
    ]
    return "\n\n".join(items)


def read_actions(path: str | os.PathLike) -> pd.DataFrame:
    """The human labels (released ``actions.csv`` schema) as raw strings, one row per data row.

    Adds ``line`` (the line number in the file; the header is line 1), ``raw`` (the row
    as written, for reports) and ``fields`` (its number of fields) so that problems can
    be reported against the row. Values are stripped of surrounding spaces but not
    checked here (the export validates them). A UTF-8 BOM is accepted.
    """
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
        raise LabelError(f"{path}: cannot read actions ({exc})") from None
    if not rows:
        raise LabelError(f"{path}: empty file (expected header {','.join(ACTIONS_COLUMNS)})")
    header = [c.strip() for c in rows[0]]
    if header != ACTIONS_COLUMNS:
        raise LabelError(f"{path}: header {','.join(header)}, expected {','.join(ACTIONS_COLUMNS)}")
    out = []
    for no, row in enumerate(rows[1:], 2):
        if not any(c.strip() for c in row):
            continue  # blank line
        cells = ([c.strip() for c in row] + [""] * len(ACTIONS_COLUMNS))[: len(ACTIONS_COLUMNS)]
        out.append([no, *cells, ",".join(row), len(row)])
    cols = ["line", *ACTIONS_COLUMNS, "raw", "fields"]
    return pd.DataFrame(out, columns=cols).astype({"line": int, "fields": int})


MAX_ACTIONS = 5  # per person, as in the reference annotation protocol
