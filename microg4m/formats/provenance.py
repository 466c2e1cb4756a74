"""Where each source came from: the facts a download record keeps, and the export's
``sources.csv`` and re-download manifest ``redownload.tsv`` (see docs/downloading.md).

A download (through yt-dlp) keeps what yt-dlp reports: id, URL, channel, uploader id,
upload date, licence, format, resolution, codecs, the yt-dlp version, the download time
and the file's sha256. A local film keeps its path (the sources table's url), size and
sha256. ``downloaded_at`` is the time of the download in UTC; where ``SOURCE_DATE_EPOCH``
is set (the reproducible-builds convention) it is that time instead, so that two runs
of the same inputs can be compared byte for byte (the tests do).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pandas as pd

from microg4m.common.atomic import write_csv, write_tsv

PROVENANCE_COLUMNS = ["extractor", "video_id", "webpage_url", "channel", "channel_id", "uploader_id",
                      "upload_date", "license", "format_id", "resolution", "vcodec", "acodec",
                      "ytdlp_version", "downloaded_at", "size", "sha256"]
# sources.csv: the sources of the exported dataset, one row each, with their clip count.
SOURCES_CSV_COLUMNS = ["source_id", "clip_type", "clips", "url", "title", "duration", "width", "height", "fps",
                       *PROVENANCE_COLUMNS]
# redownload.tsv: a sources table (source_id, url, clip_type) with what pins each file.
REDOWNLOAD_COLUMNS = ["source_id", "url", "clip_type", "format_id", "size", "sha256"]
YOUTUBE_STANDARD = "standard YouTube licence (yt-dlp reports no licence)"


def sha256(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def download_time() -> str:
    """Now in UTC (ISO 8601, seconds), or SOURCE_DATE_EPOCH where it is set."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    t = int(epoch) if epoch and epoch.strip().isdigit() else time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _date(yyyymmdd) -> str | None:
    s = str(yyyymmdd or "")
    return f"{s[:4]}-{s[4:6]}-{s[6:8]}" if len(s) == 8 and s.isdigit() else (s or None)


def from_info(info: dict | None) -> dict:
    """The provenance fields of a yt-dlp info dict (the downloaded format's, when merged)."""
    import yt_dlp.version

    info = info or {}
    extractor = info.get("extractor_key") or info.get("extractor")
    licence = info.get("license")
    if not licence and str(extractor).lower() == "youtube":
        licence = YOUTUBE_STANDARD
    return {
        "extractor": extractor,
        "video_id": info.get("id"),
        "webpage_url": info.get("webpage_url") or info.get("original_url"),
        "channel": info.get("channel") or info.get("uploader"),
        "channel_id": info.get("channel_id"),
        "uploader_id": info.get("uploader_id"),
        "upload_date": _date(info.get("upload_date")),
        "license": licence,
        "format_id": info.get("format_id"),
        "resolution": info.get("resolution"),
        "vcodec": info.get("vcodec"),
        "acodec": info.get("acodec"),
        "ytdlp_version": yt_dlp.version.__version__,
        "downloaded_at": download_time(),
    }


def of_local_film() -> dict:
    return {"extractor": "local file"}


def of_file(path: str | os.PathLike) -> dict:
    """Size and sha256 of the kept file."""
    return {"size": Path(path).stat().st_size, "sha256": sha256(path)}


def empty() -> dict:
    return dict.fromkeys(PROVENANCE_COLUMNS)


# ---------------------------------------------------------------- the export's files


def dataset_sources(provenance: pd.DataFrame, clips_per_source: dict[str, int]) -> pd.DataFrame:
    """The rows of the sources that have clips in the dataset, in source-id order."""
    df = provenance.copy()
    for col in SOURCES_CSV_COLUMNS:
        if col not in df.columns:
            df[col] = ""
    df = df[df["source_id"].isin(clips_per_source)].copy()
    df["clips"] = df["source_id"].map(clips_per_source).astype(int)
    return df.sort_values("source_id", kind="stable")[SOURCES_CSV_COLUMNS].reset_index(drop=True)


def write_export_files(out_dir: str | os.PathLike, provenance: pd.DataFrame,
                       clips_per_source: dict[str, int]) -> pd.DataFrame:
    """``sources.csv`` and ``redownload.tsv`` of an export; returns the sources.csv rows."""
    out = Path(out_dir)
    rows = dataset_sources(provenance, clips_per_source)
    write_csv(out / "sources.csv", rows)
    write_tsv(out / "redownload.tsv", rows[REDOWNLOAD_COLUMNS])
    return rows


def read_sources_csv(path: str | os.PathLike) -> pd.DataFrame:
    """An export's ``sources.csv`` (as strings, in file order); ValueError naming a missing column."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in SOURCES_CSV_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not an export's sources.csv (missing column(s) {', '.join(missing)})")
    return df
