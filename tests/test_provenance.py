"""Provenance of each source: real yt-dlp downloads from a loopback HTTP server, a local
film, and the YouTube metadata fields as yt-dlp's own YouTube test data has them."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
import yt_dlp
import yt_dlp.version
from yt_dlp.extractor.youtube import YoutubeIE

from conftest import ffmpeg, get_footage
from loopback import serve
from microg4m.stages import download
from microg4m.formats import provenance
from microg4m.formats.records import read_records


@pytest.fixture(scope="module")
def www(tmp_path_factory):
    """A web root with a 2 s H.264 video and a page that describes it (schema.org JSON-LD)."""
    root = tmp_path_factory.mktemp("www")
    ffmpeg("-i", str(get_footage("pianist")), "-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-an",
           str(root / "pianist.mp4"))
    with serve(root) as base:
        ld = {"@context": "https://schema.org", "@type": "VideoObject", "name": "A pianist practising",
              "uploadDate": "2024-03-05T10:00:00Z", "author": {"@type": "Person", "name": "Jane Doe"},
              "contentUrl": f"{base}/pianist.mp4", "encodingFormat": "video/mp4", "duration": "PT2S"}
        (root / "page.html").write_text(
            "<!DOCTYPE html><html><head><title>A pianist practising</title>"
            f'<script type="application/ld+json">{json.dumps(ld)}</script></head><body></body></html>')
        yield root, base


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_loopback_download_records_its_provenance(www, tmp_path, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    root, base = www
    t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    out = tmp_path / "results" / "download" / "page.tsv"
    rec = download.run([{"source_id": "page", "url": f"{base}/page.html", "clip_type": "r"}], out)[0]
    t1 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
    assert rec["status"] == "ok", rec
    video = tmp_path / "results" / rec["path"]
    assert rec["extractor"] == "Generic" and rec["video_id"] == "page"
    assert rec["webpage_url"] == f"{base}/page.html"
    assert rec["title"] == "A pianist practising" and rec["channel"] == "Jane Doe"
    assert rec["upload_date"] == "2024-03-05"
    assert rec["format_id"] and rec["resolution"] == "640x480" and rec["vcodec"] == "h264"
    assert rec["fps"] == pytest.approx(30, abs=1) and rec["duration"] == pytest.approx(2, abs=0.2)
    assert rec["ytdlp_version"] == yt_dlp.version.__version__
    assert t0 <= rec["downloaded_at"] <= t1
    assert rec["size"] == video.stat().st_size and rec["sha256"] == sha(video) == sha(root / "pianist.mp4")
    assert rec["license"] is None  # the page names none, and yt-dlp reports none
    # the status table and the record file keep every field; a second run returns them unchanged
    back = read_records(out)[0]
    assert back["sha256"] == rec["sha256"] and back["channel"] == "Jane Doe" and back["downloaded_at"] == rec[
        "downloaded_at"]
    first = out.read_bytes()
    download.run([{"source_id": "page", "url": f"{base}/page.html", "clip_type": "r"}], out)
    assert out.read_bytes() == first


def test_a_direct_file_url_records_the_servers_date(www, tmp_path):
    root, base = www
    rec = download.fetch("direct", f"{base}/pianist.mp4", "r", tmp_path / "d")
    assert rec["status"] == "ok", rec
    mtime = time.strftime("%Y-%m-%d", time.gmtime((root / "pianist.mp4").stat().st_mtime))
    assert rec["upload_date"] == mtime  # yt-dlp's generic extractor reads Last-Modified
    assert rec["sha256"] == sha(root / "pianist.mp4")


def test_a_film_records_its_path_size_and_sha256(tmp_path):
    film = get_footage("dancer")
    rec = download.fetch("film", str(film), "m", tmp_path / "download")
    assert rec["status"] == "ok"
    assert rec["url"] == str(film) and rec["extractor"] == "local file"
    assert rec["size"] == film.stat().st_size and rec["sha256"] == sha(film)
    assert rec["ytdlp_version"] is None and rec["downloaded_at"] is None  # linked, not downloaded


def test_the_download_time_follows_source_date_epoch(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert provenance.download_time() == "2026-01-01T00:00:00Z"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert abs(time.mktime(time.strptime(provenance.download_time(), "%Y-%m-%dT%H:%M:%SZ"))
               - time.mktime(time.gmtime())) < 5


def _youtube_test_info(video_id: str) -> dict:
    """The plain fields of an info_dict of yt-dlp's own YouTube tests (its expected values)."""
    test = next(t for t in YoutubeIE._TESTS if t.get("info_dict", {}).get("id") == video_id)
    return {k: v for k, v in test["info_dict"].items()
            if isinstance(v, (str, int)) and not str(v).startswith(("md5:", "count:", "re:"))}


@pytest.mark.parametrize("video_id", ["M4gD1WSo5mA", "eQcmzGIKrzg"])  # yt-dlp's tests of CC-licensed videos
def test_youtube_fields_map_into_the_record(www, tmp_path, video_id):
    """yt-dlp processes a YouTube info dict (its own test's fields, the file on the loopback
    server) and downloads it; the record takes channel, uploader id, licence ... from it."""
    root, base = www
    expected = _youtube_test_info(video_id)
    info = dict(expected, extractor="youtube", extractor_key="Youtube",
                webpage_url=f"https://www.youtube.com/watch?v={video_id}",
                formats=[{"format_id": "134", "url": f"{base}/pianist.mp4", "ext": "mp4", "width": 640, "height": 480,
                          "vcodec": "avc1.4d401e", "acodec": "none", "fps": 30}])
    opts = {"quiet": True, "no_warnings": True, "outtmpl": str(tmp_path / "%(id)s.%(ext)s"), "format": "134"}
    with yt_dlp.YoutubeDL(opts) as ydl:
        done = ydl.process_ie_result(info, download=True)
    p = provenance.from_info(done)
    assert (tmp_path / f"{video_id}.mp4").is_file()
    assert p["extractor"] == "Youtube" and p["video_id"] == video_id
    assert p["channel"] == expected["channel"] and p["channel_id"] == expected["channel_id"]
    assert p["uploader_id"] == expected["uploader_id"] and p["license"] == expected["license"]
    assert p["license"].startswith("Creative Commons")
    day = expected["upload_date"]
    assert p["upload_date"] == f"{day[:4]}-{day[4:6]}-{day[6:]}"
    assert p["format_id"] == "134" and p["resolution"] == "640x480" and p["vcodec"] == "avc1.4d401e"


def test_a_youtube_video_without_a_licence_is_the_standard_licence():
    p = provenance.from_info({"id": "x", "extractor_key": "Youtube", "license": None})
    assert p["license"] == provenance.YOUTUBE_STANDARD
    assert provenance.from_info({"id": "x", "extractor_key": "Generic"})["license"] is None


def test_a_local_file_through_ytdlp_keeps_the_tables_url_not_this_machines_path(www, tmp_path):
    """yt-dlp reads it as a file:// URL of this machine; the record names it as the table does
    (two machines, or two folders, give the same record)."""
    root, _ = www
    rec = download.fetch("loc", str(root / "pianist.mp4"), "r", tmp_path / "d")
    assert rec["status"] == "ok" and rec["extractor"] == "Generic" and rec["ytdlp_version"]
    assert rec["url"] == str(root / "pianist.mp4") and rec["webpage_url"] is None
    assert rec["sha256"] == sha(root / "pianist.mp4")
