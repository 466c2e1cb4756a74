"""The sources table: load it and validate every row before any job runs."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from urllib.parse import unquote

import jsonschema
import pandas as pd

from microg4m import config

YOUTUBE_ID = re.compile(r"[A-Za-z0-9_-]{11}")  # fullmatch


class SourcesError(ValueError):
    """A bad sources table; the message names the file, the row, the field and the reason."""


def _schema() -> dict:
    return config.schema("sources")


def _text(path: Path) -> str:
    """The table's text: strict UTF-8 (a BOM is allowed). A line that is not UTF-8 is
    named with its source id (when that cell is readable), its field and the byte."""
    data = path.read_bytes()
    if not data:
        raise SourcesError(f"sources table {path}: empty file (0 bytes); it needs the header line "
                           f"source_id<TAB>url<TAB>clip_type and one row per source")
    data = data.removeprefix(b"\xef\xbb\xbf")
    lines = data.split(b"\n")
    header = lines[0].decode("utf-8", "replace").rstrip("\r").split("\t")
    problems = []
    for number, line in enumerate(lines, start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            cells = line.split(b"\t")
            cell = len(line[: exc.start].split(b"\t")) - 1  # the cell holding the bad byte
            field = header[cell].strip() if number > 1 and cell < len(header) else f"column {cell + 1}"
            try:
                sid = cells[0].decode("utf-8").strip()
            except UnicodeDecodeError:
                sid = ""
            what = "the header" if number == 1 else f"source_id {sid!r}" if sid else "source id not readable"
            problems.append(f"line {number} ({what}), field {field}: byte 0x{line[exc.start]:02x} "
                            f"(byte {exc.start + 1} of the line) is not UTF-8")
    if problems:
        raise SourcesError(f"sources table {path}: not UTF-8 (saved as Latin-1 or Windows-1252? save it as "
                           f"UTF-8):\n  " + "\n  ".join(problems))
    text = data.decode("utf-8")
    if not text.strip():
        raise SourcesError(f"sources table {path}: empty (only blank lines); it needs the header line "
                           f"source_id<TAB>url<TAB>clip_type and one row per source")
    return text


def load_sources(path: str | os.PathLike) -> pd.DataFrame:
    """Read and validate the table; rows keep their order. Raises SourcesError."""
    path = Path(path)
    if not path.is_file():
        raise SourcesError(f"sources table {path}: no such file")
    text = _text(path)
    try:
        # No comment= here: pandas would cut a line at any '#', even inside a URL
        # (fragments, file names); comment lines are dropped below, by their first cell.
        df = pd.read_csv(io.StringIO(text), sep="\t", dtype=str, keep_default_na=False, skip_blank_lines=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise SourcesError(f"sources table {path}: cannot parse as TSV ({exc})") from None
    df.columns = [c.strip() for c in df.columns]
    schema = _schema()
    missing = [c for c in schema["required"] if c not in df.columns]
    if missing:
        raise SourcesError(f"sources table {path}: missing column(s) {', '.join(missing)}")
    validator = jsonschema.Draft202012Validator(schema)
    seen: dict[str, int] = {}
    problems = []
    first = df.columns[0]
    skip = df[first].str.lstrip().str.startswith("#") | (df.apply(lambda c: c.str.strip()) == "").all(axis=1)
    n = 0
    for line, row in enumerate(df.to_dict("records"), start=2):
        if skip.iloc[line - 2]:
            continue  # a comment line or a blank line
        n += 1
        where = f"row {n} (line {line})"
        row = {k: v.strip() for k, v in row.items() if v is not None}
        for k in schema["required"]:
            if row.get(k, "") == "":
                row.pop(k, None)  # an empty cell counts as a missing field
        for err in sorted(validator.iter_errors(row), key=lambda e: list(e.path)):
            field = err.path[0] if err.path else (err.message.split("'")[1] if "'" in err.message else "?")
            value = row.get(field, "")
            if err.validator == "required":
                reason = "missing value"
            elif err.validator == "pattern":
                reason = f"{value!r} may only contain letters, digits, '_' and '-'"
            elif err.validator == "enum":
                reason = f"{value!r} is not one of r (real), m (movie)"
            else:
                reason = err.message
            problems.append(f"{where}, field {field}: {reason}")
        sid = row.get("source_id")
        if sid:
            if sid in seen:
                problems.append(f"{where}, field source_id: {sid!r} duplicates row {seen[sid]}")
            else:
                seen[sid] = n
    if problems:
        raise SourcesError(f"sources table {path}:\n  " + "\n  ".join(problems))
    if n == 0:
        raise SourcesError(f"sources table {path}: no sources (the header line and no rows)")
    df = df[~skip.to_numpy()].apply(lambda col: col.str.strip())
    return df.set_index("source_id", drop=False)


def normalize_url(url: str, base: str | os.PathLike = ".") -> tuple[str, Path | None]:
    """(url for yt-dlp, local path or None). A bare 11-character id is a YouTube id."""
    if url.startswith("file://"):
        # A file URL is percent-encoded (RFC 8089; Path.as_uri() writes %20 for a space).
        # Escapes that do not decode as UTF-8 (caf%E9) are kept literally: a name that is
        # not UTF-8 could not be tracked by Snakemake nor stored in the UTF-8 records.
        path = url[len("file://"):]
        try:
            url = unquote(path, errors="strict")
        except UnicodeDecodeError:
            url = path
    elif "://" in url:
        return url, None
    elif YOUTUBE_ID.fullmatch(url) and not (Path(base) / url).exists():
        return f"https://www.youtube.com/watch?v={url}", None
    local = Path(url) if Path(url).is_absolute() else Path(base) / url
    return local.resolve().as_uri(), local
