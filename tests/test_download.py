"""Download: yt-dlp on local files, failures recorded with their reason."""

from conftest import ffmpeg, get_footage
from microg4m import download


def fetch(sid, url, clip_type, video_dir, **kw):
    return download.fetch(sid, url, clip_type, video_dir, **kw)


def test_local_file_through_ytdlp(tmp_path):
    src = tmp_path / "clip.mp4"
    ffmpeg("-i", str(get_footage("pianist")), "-t", "2", "-c:v", "libx264", "-preset", "ultrafast", str(src))
    out = tmp_path / "results" / "download" / "p1.tsv"
    rec = download.run([{"source_id": "p1", "url": src.as_uri(), "clip_type": "r"}], out)[0]
    assert rec["status"] == "ok", rec
    assert (tmp_path / "results" / rec["path"]).is_file()
    assert rec["width"] == 640 and rec["height"] == 480 and rec["duration"] > 1.5
    back = download.read_records(out)[0]
    assert back["status"] == "ok" and back["path"] == rec["path"] and back["title"] == rec["title"]
    # A second run skips the download.
    assert fetch("p1", src.as_uri(), "r", out.parent)["reason"] == "already downloaded"


def test_film_is_linked_not_reencoded(tmp_path):
    film = get_footage("dancer")
    rec = fetch("film", str(film), "m", tmp_path / "download")
    assert rec["status"] == "ok"
    assert (tmp_path / rec["path"]).read_bytes() == film.read_bytes()


def test_unreachable_url_is_recorded_after_retries(tmp_path):
    out = tmp_path / "download" / "gone.tsv"
    sources = [{"source_id": "gone", "url": "http://127.0.0.1:9/missing.mp4", "clip_type": "r"}]
    rec = download.run(sources, out, retries=2, backoff_seconds=0.01)[0]
    assert rec["status"] == "failed" and rec["attempts"] == 2
    assert "Connection refused" in rec["reason"]
    assert download.read_records(out)[0]["status"] == "failed"


def test_missing_film_and_not_a_video(tmp_path):
    rec = fetch("nofilm", str(tmp_path / "nope.mp4"), "m", tmp_path / "d")
    assert rec["status"] == "failed" and "does not exist" in rec["reason"]
    text = tmp_path / "notes.mp4"
    text.write_text("hello")
    rec = fetch("txt", str(text), "m", tmp_path / "d")
    assert rec["status"] == "failed" and rec["reason"].startswith("not a video")


def test_shell_metacharacters_are_inert(tmp_path):
    marker = tmp_path / "pwned"
    url = f"http://127.0.0.1:9/a.mp4;touch {marker}&&$(touch {marker})"
    rec = fetch("meta", url, "r", tmp_path / "d", retries=1)
    assert rec["status"] == "failed" and not marker.exists()
