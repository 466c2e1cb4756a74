"""Download: yt-dlp on local files, failures recorded with their reason."""

from conftest import ffmpeg, get_footage
from microg4m.stages import download
from microg4m.formats import provenance
from microg4m.formats.records import read_records


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
    back = read_records(out)[0]
    assert back["status"] == "ok" and back["path"] == rec["path"] and back["title"] == rec["title"]
    # A second run skips the download and returns the first run's record, unchanged.
    first = out.read_bytes()
    assert fetch("p1", src.as_uri(), "r", download.video_folder(out), results_dir=out.parent.parent) == rec
    download.run([{"source_id": "p1", "url": src.as_uri(), "clip_type": "r"}], out)
    assert out.read_bytes() == first


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
    assert read_records(out)[0]["status"] == "failed"


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


def _source(tmp_path, name="clip.mp4", seconds=2):
    src = tmp_path / "media" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    ffmpeg("-i", str(get_footage("pianist")), "-t", str(seconds), "-c:v", "libx264", "-preset", "ultrafast",
           str(src))
    return src


def test_every_state_a_kill_can_leave_gives_the_first_runs_record(tmp_path, monkeypatch):
    """A killed download job leaves one of: parts in the staging folder, a record without
    its video (killed between the two), or the video with its record but no status table.
    Each re-run gives the same record (title, attempts ...) and status table as the first run."""
    # a video fetched again is stamped with the time of that fetch (downloaded_at): a fixed
    # clock, as for reproducible builds, so that a later second compares equal
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    src = _source(tmp_path)
    sources = [{"source_id": "p1", "url": src.as_uri(), "clip_type": "r"}]
    d = tmp_path / "results" / "download"
    rec = download.run(sources, d / "p1.tsv")[0]
    table = (d / "p1.tsv").read_bytes()
    assert rec["status"] == "ok" and rec["attempts"] == 1 and rec["title"] == "clip"
    videos = download.video_folder(d / "p1.tsv")
    record, video = download.record_file(videos, "p1"), tmp_path / "results" / rec["path"]
    assert rec["path"] == "download/videos/p1.mp4"
    assert sorted(p.name for p in videos.iterdir()) == ["p1.mp4", "p1.record.json"]

    def rerun():
        (d / "p1.tsv").unlink()
        assert download.run(sources, d / "p1.tsv")[0] == rec
        assert (d / "p1.tsv").read_bytes() == table
        assert sorted(p.name for p in videos.iterdir()) == ["p1.mp4", "p1.record.json"]  # no staging left

    rerun()  # the video and its record, no status table
    video.unlink()
    rerun()  # a record without its video: fetched again
    video.unlink()
    record.unlink()
    stale = videos / ".p1.0123456789.partial"  # parts of an earlier URL
    stale.mkdir()
    (stale / "p1.mp4.part").write_bytes(b"x" * 100)
    rerun()  # nothing but stale parts


def test_a_changed_url_is_fetched_again(tmp_path):
    a, b = _source(tmp_path, "a.mp4", 2), _source(tmp_path, "b.mp4", 3)
    d = tmp_path / "results" / "download"
    first = download.fetch("s", a.as_uri(), "r", d)
    second = download.fetch("s", b.as_uri(), "r", d)
    assert first["title"] == "a" and second["title"] == "b" and second["duration"] > first["duration"]
    assert (tmp_path / "results" / second["path"]).read_bytes() != a.read_bytes()


def test_a_video_without_a_record_is_kept_and_recorded_from_then_on(tmp_path):
    """A results folder from before records were kept: the video is used as it is."""
    src = _source(tmp_path)
    d = tmp_path / "results" / "download"
    d.mkdir(parents=True)
    (d / "old.mp4").write_bytes(src.read_bytes())
    rec = download.fetch("old", "https://example.invalid/old.mp4", "r", d)
    assert rec["status"] == "ok" and rec["reason"] == "already downloaded" and rec["width"] == 640
    assert download.fetch("old", "https://example.invalid/old.mp4", "r", d) == rec


def test_a_zero_byte_local_file_is_reported_as_empty(tmp_path):
    zero = tmp_path / "zero.mp4"
    zero.write_bytes(b"")
    for clip_type in ("r", "m"):
        rec = fetch(f"zero_{clip_type}", zero.as_uri(), clip_type, tmp_path / "d")
        assert rec["status"] == "failed" and rec["attempts"] == 0, rec
        assert rec["reason"] == f"not a video: {zero}: empty file (0 bytes)"
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == []  # nothing staged, nothing kept


def test_a_replaced_local_file_is_linked_again_and_its_sha256_follows(tmp_path):
    """A film replaced under the same path (another cut, a better copy) is linked again, so
    that its clips are made from it and its provenance names its bytes; an untouched one
    keeps its first record."""
    film = tmp_path / "films" / "Gravity.mp4"
    film.parent.mkdir()
    film.write_bytes(_source(tmp_path, "a.mp4", 2).read_bytes())
    d = tmp_path / "results" / "download"
    sources = [{"source_id": "gravity", "url": str(film), "clip_type": "m"}]
    first = download.run(sources, d / "u.tsv")[0]
    assert download.run(sources, d / "u.tsv")[0] == first  # unchanged: the first record
    replacement = _source(tmp_path, "b.mp4", 3)
    replacement.replace(film)  # a new file under the old name (the link keeps the old bytes)
    second = download.run(sources, d / "u.tsv")[0]
    assert second["status"] == "ok" and second["duration"] > first["duration"]
    assert second["size"] == film.stat().st_size != first["size"]
    assert second["sha256"] == provenance.sha256(film) != first["sha256"]
    assert (tmp_path / "results" / second["path"]).read_bytes() == film.read_bytes()
    assert read_records(d / "u.tsv")[0]["sha256"] == second["sha256"]
    # the same bytes written again (a new modification time): linked again, the same record
    film.write_bytes(film.read_bytes())
    assert download.run(sources, d / "u.tsv")[0] == second
