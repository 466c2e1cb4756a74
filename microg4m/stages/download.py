"""Download stage: one source video through yt-dlp's Python API (never a shell).

A failure of the source is data: the job writes a status record (``ok``/``failed`` with
the reason and yt-dlp's metadata), and later stages treat a failed source as zero clips.
A fault of the machine (no space, a quota, an unwritable folder ...: the reason class
``machine``, microg4m/common/faults.py) is not: the job fails with it, and the next run
fetches the source again.
Local films (clip type ``m``) are hard-linked or copied, never re-encoded.

A download is written into a hidden staging folder, checked, and moved into place
after its record (``{source_id}.record.json``); a job that runs again (after a kill, or
because Snakemake re-runs it) finds the video with its record and returns that record
unchanged, so its status table is the same, byte for byte, as the first run's.

A failure gets a reason class and advice (download_errors.py); a download keeps its
provenance (provenance.py: channel, licence, format, sha256 ...). yt-dlp runs with the
packaged JavaScript runtime and the YouTube settings of the config (ytdlp_options.py).
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path

import pandas as pd

from microg4m.formats import download_errors, provenance
from microg4m.common import faults, free_space, media
from microg4m.engines import ytdlp_options
from microg4m.common.atomic import write_text, write_tsv
from microg4m.formats.sources import normalize_url
from microg4m.engines.ytdlp_options import DEFAULT_FORMAT, YtdlpLog, ydl_options
from microg4m.formats.records import RECORD_COLUMNS

log = logging.getLogger(__name__)

def _clean(text) -> str | None:
    """Text safe for a one-line UTF-8 record (titles may carry invalid bytes or surrogates)."""
    if text is None:
        return None
    text = str(text).encode("utf-8", "replace").decode("utf-8").replace("\ufffd", "?")
    return " ".join(text.split())


VIDEO_EXTS = {".mp4", ".mkv", ".webm", ".mov", ".avi", ".m4v", ".flv", ".ts", ".mpg", ".mpeg", ".wmv", ".3gp", ".ogv"}


def _existing_video(video_dir: Path, source_id: str) -> Path | None:
    """A finished download: exactly ``{source_id}.{video ext}`` (never .part or .fNNN files)."""
    for p in sorted(video_dir.glob(f"{source_id}.*")):
        if p.stem == source_id and p.suffix.lower() in VIDEO_EXTS:
            return p
    return None


# A finished download is a video together with its record, the facts its first run
# learnt (title, duration, attempts ...): a re-run of the job (after a kill, or when
# Snakemake re-runs it) returns that record unchanged instead of facts it cannot learn
# again from the file alone. The record is written before the video is moved into
# place, so a video under its final name always has its record.
def record_file(video_dir: Path, source_id: str) -> Path:
    return Path(video_dir) / f"{source_id}.record.json"


def _staging(video_dir: Path, source_id: str, url: str) -> Path:
    """The folder yt-dlp writes into (partial files stay there for the next attempt);
    named by the URL so that a changed URL never resumes the old one's parts."""
    digest = hashlib.sha1(url.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return video_dir / f".{source_id}.{digest}.partial"


def _first_record(video_dir: Path, video: Path, source_id: str, url: str, clip_type: str, fmt: str,
                  results: Path):
    """The record of ``video``'s first run if it is the download of this url and format."""
    try:
        saved = json.loads(record_file(video_dir, source_id).read_text(encoding="utf-8"))
        record = saved["record"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(record, dict):
        return None
    same = (record.get("source_id"), record.get("url"), record.get("clip_type"), saved.get("format"))
    if same != (source_id, url, clip_type, fmt) or record.get("path") != os.path.relpath(video, results):
        return None
    return {k: record.get(k) for k in RECORD_COLUMNS}


def _write_record(video_dir: Path, record: dict, fmt: str, local: Path | None = None) -> None:
    saved = {"format": fmt, "record": record}
    if local is not None and local.is_file():
        saved["local"] = _stamp(local)  # the file linked, to see later whether it changed
    write_text(record_file(video_dir, record["source_id"]), json.dumps(saved, ensure_ascii=False, indent=1) + "\n")


def _stamp(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _local_changed(video_dir: Path, source_id: str, local: Path, record: dict) -> str | None:
    """How the local file a source was linked from changed since (None: it did not, or it
    is gone and the linked copy is all there is): its size or modification time against
    those recorded when it was linked; for a record written before they were kept, its
    size and sha256 against the record's."""
    if not local.is_file():
        return None
    saved = json.loads(record_file(video_dir, source_id).read_text(encoding="utf-8")).get("local")
    now = _stamp(local)
    if saved is not None:
        changed = [k for k in ("size", "mtime_ns") if saved.get(k) != now[k]]
        return f"{' and '.join(changed)} changed" if changed else None
    if record.get("size") is not None and int(record["size"]) != now["size"]:
        return "size changed"
    if record.get("sha256") and provenance.sha256(local) != record["sha256"]:
        return "sha256 changed"
    return None


def _link_or_copy(src: Path, dest: Path) -> None:
    dest.unlink(missing_ok=True)
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def _info_fields(info: dict | None) -> dict:
    info = info or {}
    return {
        "title": _clean(info.get("title")),
        "duration": info.get("duration"),
        "width": info.get("width"),
        "height": info.get("height"),
        "fps": info.get("fps"),
    }


def fetch(source_id: str, url: str, clip_type: str, video_dir: str | os.PathLike, *,
          format: str = DEFAULT_FORMAT, retries: int = 3, backoff_seconds: float = 2.0,
          cookies=None, sleep_requests=0, sleep_interval=0, rate_limit=None, proxy=None,
          socket_timeout=20, base_dir: str | os.PathLike = ".", results_dir: str | os.PathLike | None = None,
          check_free_space: bool = True, **youtube) -> dict:
    """Fetch one source into ``video_dir`` (``results/download/videos``); return its status record.

    The record's ``path`` is relative to ``results_dir`` (default: the parent of video_dir).
    A source already downloaded (by this url and format) keeps its first run's record.
    ``youtube``: cookies_from_browser, player_client, po_token_provider, extractor_args,
    impersonate (see ytdlp_options.options). ``check_free_space``: before a film is copied or
    yt-dlp writes, the space it needs is checked (microg4m/common/free_space.py).
    """
    video_dir = Path(video_dir)
    video_dir.mkdir(parents=True, exist_ok=True)
    results = Path(results_dir) if results_dir is not None else video_dir.parent
    ydl_url, local = normalize_url(url, base_dir)
    staging = _staging(video_dir, source_id, url)
    for old in video_dir.glob(f".{glob.escape(source_id)}.*.partial"):
        if old != staging:  # the parts of an earlier URL
            shutil.rmtree(old, ignore_errors=True)

    video = _existing_video(video_dir, source_id)
    if video is not None:
        first = _first_record(video_dir, video, source_id, url, clip_type, format, results)
        changed = _local_changed(video_dir, source_id, local, first) if first and local is not None else None
        if first is not None and changed is None:
            log.info("%s: already downloaded (%s); its first record is kept", source_id, video)
            shutil.rmtree(staging, ignore_errors=True)
            return first
        if changed is not None:
            log.info("%s: %s %s since it was linked; linking it again", source_id, local, changed)
            video.unlink()
        elif record_file(video_dir, source_id).exists():
            log.info("%s: %s was downloaded from another url or format; fetching again", source_id, video)
            video.unlink()
        else:
            # A results folder written before records were kept: nothing to learn the
            # first run's facts from; this record is kept from now on.
            log.info("%s: %s already there, without a record", source_id, video)
            record = _new_record(source_id, url, clip_type)
            record["reason"] = "already downloaded"
            _probe_into(record, video, video, results)
            record = _finish(record, video)
            if record["status"] == "ok":
                _write_record(video_dir, record, format, local)
            return record
    record_file(video_dir, source_id).unlink(missing_ok=True)  # a record whose video never got in place

    record = _new_record(source_id, url, clip_type)
    staging.mkdir(exist_ok=True)
    staged = None
    if local is not None and local.is_file() and local.stat().st_size == 0:
        record["reason"] = f"not a video: {local}: empty file (0 bytes)"  # yt-dlp: "Did not get any data blocks"
    elif clip_type == "m" and local is not None:
        # Films are local files: link (or copy) them, never re-encode.
        if not local.is_file():
            record["reason"] = f"local file {local} does not exist"
        else:
            suffix = local.suffix.lower() if local.suffix.lower() in VIDEO_EXTS else ".mp4"
            staged = staging / f"{source_id}{suffix}"
            if check_free_space:
                free_space.require(staging, free_space.copy_bytes(local, staging), f"the copy of {local}")
            _link_or_copy(local, staged)
            record["title"] = local.stem
            record.update(provenance.of_local_film())
    else:
        staged = _yt_dlp(record, ydl_url, staging, format=format, retries=retries,
                         backoff_seconds=backoff_seconds, cookies=cookies, sleep_requests=sleep_requests,
                         sleep_interval=sleep_interval, rate_limit=rate_limit, proxy=proxy,
                         socket_timeout=socket_timeout, check_free_space=check_free_space, **youtube)
        if local is not None:  # a local file's place is the table's url, not this machine's file:// URL
            record["webpage_url"] = None
    if staged is not None:
        _probe_into(record, staged, video_dir / staged.name, results, name=local or url)
    record = _finish(record, staged)
    if record["status"] == "ok":
        _write_record(video_dir, record, format, local)  # first the record, then the video
        os.replace(staged, video_dir / staged.name)
    shutil.rmtree(staging, ignore_errors=True)
    return record


def _new_record(source_id: str, url: str, clip_type: str) -> dict:
    return {"source_id": source_id, "url": url, "clip_type": clip_type, "status": "failed",
            "reason": None, "path": None, "attempts": 0,
            "title": None, "duration": None, "width": None, "height": None, "fps": None,
            "reason_class": None, "advice": None, **provenance.empty()}


def _room_for(staging: Path, source_id: str):
    """A yt-dlp match filter that checks, once yt-dlp has picked the formats and before it
    writes, that the staging folder's filesystem has room for them (free_space.py)."""

    def check(info: dict, *, incomplete: bool = False) -> None:
        size = None if incomplete else free_space.announced_bytes(info)
        if size is not None:
            free_space.require(staging, size * free_space.DOWNLOAD_FACTOR, f"the download of {source_id}")
        return None

    return check


def _yt_dlp(record: dict, ydl_url: str, staging: Path, *, format, retries, backoff_seconds,
            check_free_space=True, **options) -> Path | None:
    """Download into ``staging`` with retries; fill ``record``; return the file or None."""
    import yt_dlp

    source_id = record["source_id"]
    for attempt in range(1, max(1, int(retries)) + 1):
        record["attempts"] = attempt
        try:
            ylog = YtdlpLog()
            opts = ydl_options(str(staging / f"{source_id}.%(ext)s"), fmt=format, **options) | {"logger": ylog}
            if check_free_space:
                opts["match_filter"] = _room_for(staging, source_id)
            with yt_dlp.YoutubeDL(opts) as ydl:
                info = ydl.extract_info(ydl_url, download=True)
            record.update(_info_fields(info), reason_class=None, advice=None)  # an earlier attempt's class
            record.update(provenance.from_info(info))
            staged = _existing_video(staging, source_id)
            if staged is None:
                record["reason"] = "yt-dlp reported success but wrote no file"
            return staged
        except faults.MachineFault:
            raise  # too little space for it (_room_for)
        except Exception as exc:  # yt-dlp raises DownloadError and friends
            reason = _clean(str(exc)).removeprefix("ERROR: ").strip() or type(exc).__name__
            cls, reason = download_errors.classify_attempt(reason, exc, ylog.warnings)
            if cls is download_errors.MACHINE:  # not the source's: the job fails, the next run fetches it
                raise faults.MachineFault(staging, f"yt-dlp: {reason}", errno=faults.errno_of(exc)
                                          or faults.errno_in_text(reason)) from exc
            record.update(reason=reason, reason_class=cls.name, advice=cls.advice)
            log.warning("%s: attempt %d failed (%s): %s", source_id, attempt, cls.name, reason)
            if not cls.retry or attempt == retries:
                return None
            time.sleep(float(backoff_seconds) * 2 ** (attempt - 1))
    return None


def _probe_into(record: dict, video: Path, final: Path, results: Path, name=None) -> None:
    """Check that ``video`` (to be kept as ``final``) is a video; fill the record's size,
    fps, duration, codec and resolution where yt-dlp gave none. ``name``: how a failure names the source."""
    try:
        info = media.probe(video)
    except media.MediaError as exc:
        detail = str(exc).removeprefix(f"{video}: ")
        record["reason"] = f"not a video: {name or final}: {detail}"
        return
    record.update(status="ok", reason=record["reason"] or "", path=os.path.relpath(final, results))
    for key, value in (("width", info.width), ("height", info.height), ("fps", info.fps),
                       ("duration", info.duration), ("vcodec", info.codec or None),
                       ("resolution", f"{info.width}x{info.height}")):
        if record.get(key) in (None, 0, "", "unknown"):
            record[key] = value


def _finish(record: dict, video: Path | None) -> dict:
    """The record in its final form: one-line text; the file's size and sha256 when it is
    kept, else the reason class and advice of the failure."""
    record = _one_line(record)
    if record["status"] == "ok":
        record.update(provenance.of_file(video), reason_class="", advice="")
    else:
        cls = (download_errors.BY_NAME.get(record.get("reason_class") or "")
               or download_errors.classify(record["reason"]))
        record.update(reason_class=cls.name, advice=cls.advice)
    return record


def _one_line(record: dict) -> dict:
    # One-line UTF-8 text: a film's title is its file name (a file URL's %0A or %09 makes
    # a newline or a tab in it), and reasons quote paths.
    record["title"], record["reason"] = _clean(record["title"]), _clean(record["reason"])
    return record


def check_setup(settings: dict) -> list[str]:
    """Log what yt-dlp runs with, and warn of what keeps it from today's YouTube (the check at
    the start of each download job; the same facts are in versions.tsv)."""
    log.info("yt-dlp: %s", "; ".join(f"{k} {v}" for k, v in ytdlp_options.versions()))
    found = ytdlp_options.problems(settings)
    for problem in found:
        log.warning("yt-dlp set-up: %s", problem)
    return found


VIDEOS = "videos"  # the folder of the videos and their records, beside the status tables


def video_folder(table: str | os.PathLike) -> Path:
    """Where the videos of a status table ``download/{unit}.tsv`` are kept: ``download/videos/``
    (one folder for every unit, so a re-planned unit finds its sources' videos; in the
    workflow a folder of its own that Snakemake knows, kept across download jobs)."""
    return Path(table).parent / VIDEOS


def run(sources: list[dict], out: str | os.PathLike, video_dir: str | os.PathLike | None = None,
        **settings) -> list[dict]:
    """Fetch every source of a job (dicts with source_id, url, clip_type) into
    :func:`video_folder` and write the status table ``download/{unit}.tsv`` (``out``);
    failures are rows too. The records' paths are relative to the results folder (the
    parent of ``download/``). ``video_dir``: that folder, as the workflow declares it."""
    out = Path(out)
    video_dir = Path(video_dir) if video_dir is not None else video_folder(out)
    if video_dir.resolve() != video_folder(out).resolve():
        raise ValueError(f"{video_dir}: the videos of {out} are kept in {video_folder(out)}")
    check_setup(settings)
    records = [fetch(s["source_id"], s["url"], s["clip_type"], video_dir, results_dir=out.parent.parent,
                     **settings) for s in sources]
    table = pd.DataFrame(records, columns=RECORD_COLUMNS)
    table["size"] = table["size"].astype("Int64")  # bytes, an integer also beside failed rows
    write_tsv(out, table)
    return records
