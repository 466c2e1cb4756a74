"""``microg4m verify``: is every source of a finished dataset still there, and the same file?

Reads the export's re-download manifest (``redownload.tsv``: source_id, url, clip_type,
format_id, size, sha256). A local file (a film, a path or file:// URL) is hashed where it
lies. A URL is fetched again with yt-dlp, in the recorded format, into a temporary
folder, and hashed (``hash=False``: only asks yt-dlp whether it is still available and
still offers that format). One row per source:

``same``         the file hashes as it did when the dataset was made
``changed``      it is there but its sha256 (or size) differs
``available``    (hash=False) yt-dlp still finds it, and the recorded format
``unavailable``  yt-dlp cannot fetch it: ``reason_class`` and ``reason`` say why
``missing``      a local file that is no longer there
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pandas as pd

from microg4m.formats import download_errors
from microg4m.common.atomic import write_tsv
from microg4m.formats.provenance import sha256
from microg4m.formats.sources import normalize_url

log = logging.getLogger(__name__)

COLUMNS = ["source_id", "url", "status", "reason_class", "reason", "sha256_then", "sha256_now"]


def read_manifest(path: str | os.PathLike) -> pd.DataFrame:
    path = Path(path)
    if path.is_dir():
        path = path / "redownload.tsv"
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = {"source_id", "url", "clip_type", "sha256"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: not a re-download manifest (missing column(s) {', '.join(sorted(missing))})")
    return df


def _row(src, url, status, sha_then, sha_now="", cls=None, reason="") -> dict:
    return {"source_id": src, "url": url, "status": status, "reason_class": cls.name if cls else "",
            "reason": " ".join(str(reason).split()), "sha256_then": sha_then, "sha256_now": sha_now}


def _check_local(src, url, local: Path, sha_then) -> dict:
    if not local.is_file():
        cls = download_errors.BY_NAME["missing_file"]
        return _row(src, url, "missing", sha_then, cls=cls, reason=f"local file {local} does not exist")
    now = sha256(local)
    return _row(src, url, "same" if now == sha_then else "changed", sha_then, now)


def _check_url(src, url, ydl_url, fmt, sha_then, *, hash: bool, settings: dict) -> dict:
    import yt_dlp

    from microg4m.engines.ytdlp_options import DEFAULT_FORMAT, YtdlpLog, ydl_options

    with tempfile.TemporaryDirectory(prefix=f"verify-{src}-") as tmp:
        ylog = YtdlpLog()
        opts = ydl_options(str(Path(tmp) / f"{src}.%(ext)s"), fmt=fmt or DEFAULT_FORMAT, **settings) | {"logger": ylog}
        try:
            with yt_dlp.YoutubeDL(opts) as ydl:
                info = ydl.extract_info(ydl_url, download=hash)
        except Exception as exc:  # yt-dlp's DownloadError and friends
            reason = str(exc).removeprefix("ERROR: ").strip() or type(exc).__name__
            cls, reason = download_errors.classify_attempt(reason, exc, ylog.warnings)
            return _row(src, url, "unavailable", sha_then, cls=cls, reason=reason)
        if not hash:
            return _row(src, url, "available", sha_then, reason=f"format {info.get('format_id')}")
        files = [p for p in Path(tmp).iterdir() if p.is_file() and not p.name.endswith((".part", ".ytdl"))]
        if len(files) != 1:
            return _row(src, url, "unavailable", sha_then, cls=download_errors.OTHER,
                        reason=f"yt-dlp wrote {len(files)} files: {sorted(p.name for p in files)}")
        now = sha256(files[0])
        return _row(src, url, "same" if now == sha_then else "changed", sha_then, now)


def run(manifest: str | os.PathLike, out: str | os.PathLike | None = None, *, hash: bool = True,
        base_dir: str | os.PathLike = ".", **settings) -> pd.DataFrame:
    """Check every source of ``manifest`` (a redownload.tsv, or the export folder holding it);
    write the table to ``out`` when given. ``settings``: the download settings (cookies ...)."""
    settings = {k: v for k, v in settings.items()
                if k not in ("format", "retries", "backoff_seconds")}  # the manifest pins the format
    rows = []
    for r in read_manifest(manifest).itertuples(index=False):
        ydl_url, local = normalize_url(r.url, base_dir)
        if local is not None:
            row = _check_local(r.source_id, r.url, local, r.sha256)
        else:
            row = _check_url(r.source_id, r.url, ydl_url, getattr(r, "format_id", ""), r.sha256, hash=hash,
                             settings=settings)
        log.info("%s: %s %s", r.source_id, row["status"], row["reason"])
        rows.append(row)
    df = pd.DataFrame(rows, columns=COLUMNS)
    if out is not None:
        write_tsv(out, df)
    return df
