"""Faults of the machine against faults of the input (microg4m/common/faults.py).

Real where the fault can be made here: a tmpfs that fills up (ENOSPC) or turns read-only
(EROFS) under real ffmpeg, yt-dlp and the stages' own writers, an ffmpeg killed with
SIGKILL; EDQUOT, EIO and EACCES (root passes every permission check) as the OSErrors the
kernel gives, for the pure decision beside the real ENOSPC path. The input faults are the
real thing: a truncated mp4, a text file named .mp4, a 2-second source, an HTTP 404 from a
loopback server, and yt-dlp's own bot-check message.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from pathlib import Path

import psutil
import pytest

from conftest import ffmpeg, get_footage
from loopback import serve
from microg4m.common import faults, free_space, media
from microg4m.formats import download_errors, recorded_faults
from microg4m.formats.records import read_records
from microg4m.stages import download, frames, trim
from tmpfs import fill, read_only, tmpfs

MiB = 2**20


def _machine(exc) -> int | None:
    try:
        faults.check(exc, "somewhere")
    except faults.MachineFault as fault:
        return fault.errno
    return None


@pytest.mark.parametrize("number", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES])
def test_oserrors_of_the_machine_fail_the_job_naming_path_and_errno(number):
    exc = OSError(number, os.strerror(number), "/results/frames/u0/.x/x_000001.jpg")
    with pytest.raises(faults.MachineFault) as caught:
        faults.check(exc)
    text = str(caught.value)
    assert caught.value.errno == number
    assert "/results/frames/u0/.x/x_000001.jpg" in text and errno.errorcode[number] in text
    assert "not of the input" in text
    wrapped = RuntimeError("while writing")  # found through the chain of causes
    wrapped.__cause__ = exc
    assert _machine(wrapped) == number


def test_input_errors_are_not_machine_faults():
    assert _machine(FileNotFoundError(errno.ENOENT, "No such file or directory", "in.mp4")) is None
    assert _machine(ValueError("moov atom not found")) is None
    for text in ("moov atom not found", "Invalid data found when processing input", "HTTP Error 404: Not Found",
                 "Connection refused", "source truncated: ffmpeg decoding errors (partial file)",
                 "Error while decoding stream: Operation not permitted", "Task finished with error code: -1"):
        assert faults.errno_in_text(text) is None, text
        assert not faults.recorded(text)


def test_signals_from_outside_are_machine_faults_crashes_are_the_inputs():
    assert faults.signal_fault(-signal.SIGKILL) == signal.SIGKILL
    assert faults.signal_fault(128 + signal.SIGTERM) == signal.SIGTERM
    assert faults.signal_fault(-signal.SIGSEGV) is None  # ffmpeg crashing on a malformed input
    assert faults.signal_fault(1) is None and faults.signal_fault(0) is None


def test_rows_that_earlier_versions_recorded_are_recognised():
    # the rows of results folders written before the two kinds were told apart (issue 46)
    assert faults.recorded("unable to write data: [Errno 28] No space left on device")
    assert faults.recorded("clips/u0/zidane_001.mp4: ffmpeg failed: [out#0/image2] Error muxing a packet "
                           "[out#0/image2] Task finished with error code: -28 (No space left on device)")
    assert faults.recorded("x.mp4: ffmpeg failed: exit code -9")
    assert faults.recorded("[Errno 122] Disk quota exceeded: 'results/download/videos/a.mp4'")
    assert not faults.recorded("x.mp4: ffmpeg failed: exit code -11")  # a crash: the input's


def test_a_sigkilled_ffmpeg_is_a_machine_fault(tmp_path):
    done = threading.Event()

    def kill_ffmpeg():  # as the kernel's out-of-memory killer does, until run_ffmpeg returns
        while not done.wait(0.05):
            for p in psutil.Process().children(recursive=True):
                if "ffmpeg" in p.name():
                    p.send_signal(signal.SIGKILL)

    killer = threading.Thread(target=kill_ffmpeg)
    killer.start()
    try:
        with pytest.raises(faults.MachineFault) as caught:  # a minute of test pattern, encoded in real time
            media.run_ffmpeg(["-re", "-f", "lavfi", "-i", "testsrc=size=64x64:rate=30", "-t", "60",
                              str(tmp_path / "out.mp4")], "testsrc")
    finally:
        done.set()
        killer.join()
    assert caught.value.signal == signal.SIGKILL and "SIGKILL" in str(caught.value)


def test_input_faults_stay_data(tmp_path):
    pianist = get_footage("pianist")
    full = tmp_path / "full.mp4"
    ffmpeg("-i", str(pianist), "-t", "4", "-c:v", "libx264", "-preset", "veryfast", str(full))
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n")
    for bad in (truncated, text):
        with pytest.raises(media.MediaError):
            media.probe(bad)
    short = tmp_path / "short.mp4"
    ffmpeg("-i", str(pianist), "-t", "2", "-c:v", "libx264", "-preset", "veryfast", str(short))
    record = {"source_id": "short", "clip_type": "r", "status": "ok", "path": short.name}
    clips = tmp_path / "clips"
    clips.mkdir()
    status, rows = trim.trim_source(record, tmp_path, clips)
    assert status["status"] == "ok" and status["clips"] == 0 and "source too short" in status["reason"]
    # a 404 and a bot check: recorded with their classes, not machine
    with serve(tmp_path) as base:
        rec = download.fetch("gone", f"{base}/gone.mp4", "r", tmp_path / "videos", retries=1)
    assert rec["status"] == "failed" and rec["reason_class"] == "unavailable"
    bot = "Sign in to confirm you\u2019re not a bot. Use --cookies-from-browser or --cookies for the authentication."
    assert download_errors.classify(bot).name == "bot_check"


def _downloaded(tmp_path: Path, disk: Path) -> Path:
    """7 s of the pianist (H.264 mp4) as a download on ``disk``; its download table, with the
    duration and size the download stage records."""
    src = tmp_path / "pianist.mp4"
    ffmpeg("-i", str(get_footage("pianist")), "-t", "7", "-c:v", "libx264", "-preset", "veryfast", str(src))
    video = disk / "download" / "videos" / "pianist.mp4"
    video.parent.mkdir(parents=True)
    video.write_bytes(src.read_bytes())
    info = media.probe(video)
    table = disk / "download" / "u0.tsv"
    table.write_text("source_id\tstatus\treason\tpath\tclip_type\tduration\twidth\theight\n"
                     f"pianist\tok\t\tdownload/videos/pianist.mp4\tr\t{info.duration}\t{info.width}\t{info.height}\n")
    return table


def test_ffmpeg_on_a_full_disk_fails_the_trim_job_and_records_nothing(tmp_path):
    with tmpfs(tmp_path / "disk", 4 * MiB) as disk:
        table = _downloaded(tmp_path, disk)
        fill(disk, leave=64 * 1024)
        with pytest.raises(faults.MachineFault) as caught:
            trim.run(table, disk / "clips" / "u0" / "manifest.tsv", disk / "clips" / "u0" / "status.tsv",
                     check_free_space=False)
        assert caught.value.errno == errno.ENOSPC and "No space left on device" in str(caught.value)
        assert not (disk / "clips" / "u0" / "status.tsv").exists()


def test_the_space_check_stops_trim_before_it_writes(tmp_path):
    with tmpfs(tmp_path / "disk", 24 * MiB) as disk:
        table = _downloaded(tmp_path, disk)
        info = media.probe(disk / "download" / "videos" / "pianist.mp4")
        need = free_space.clips_bytes(read_records(table))
        assert need == pytest.approx(info.duration * 30 * info.width * info.height * free_space.CLIP_BYTES_PER_PIXEL)
        fill(disk, leave=int(need + free_space.HEADROOM) - 1)
        with pytest.raises(faults.MachineFault) as caught:
            trim.run(table, disk / "clips" / "u0" / "manifest.tsv", disk / "clips" / "u0" / "status.tsv")
        message = str(caught.value)
        assert "not enough free space for the clips of u0.tsv" in message and "MiB are free" in message
        assert not (disk / "clips").exists()  # nothing written


def test_frames_on_a_read_only_disk_fail_the_job(tmp_path):
    clip = tmp_path / "clips" / "u0" / "pianist_000.mp4"
    clip.parent.mkdir(parents=True)
    ffmpeg("-i", str(get_footage("pianist")), "-t", "3", "-r", "30", "-c:v", "libx264", "-preset", "veryfast",
           str(clip))
    (clip.parent / "manifest.tsv").write_text(
        "clip_id\tsource_id\tclip_type\tseq\tstart_s\tframes\twidth\theight\tstatus\treason\n"
        "pianist_000\tpianist\tr\t0\t0\t90\t640\t480\tok\t\n")
    decisions = tmp_path / "filter.tsv"
    decisions.write_text("clip_id\tkeep\treason\npianist_000\t1\t\n")
    with tmpfs(tmp_path / "frames", 64 * MiB) as out:
        (out / "u0").mkdir()  # the job's folder is there; its clip folders cannot be written
        read_only(out)
        with pytest.raises(faults.MachineFault) as caught:
            frames.run(clip.parent / "manifest.tsv", decisions, out / "u0", out / "u0.tsv")
        assert caught.value.errno == errno.EROFS
        read_only(out, False)
        assert not (out / "u0.tsv").exists()


def _page(root: Path, base: str, size: int) -> str:
    """A page that announces its video (a real mp4 on the same server) and the video's size,
    as sites do in their JSON-LD; yt-dlp's generic extractor reads both."""
    import json

    ld = {"@context": "https://schema.org", "@type": "VideoObject", "name": "talk", "contentUrl": f"{base}/talk.mp4",
          "contentSize": str(size), "uploadDate": "2026-01-01", "description": "a talk",
          "thumbnailUrl": f"{base}/talk.jpg"}
    (root / "talk.html").write_text(f"<html><head><title>talk</title><script type=\"application/ld+json\">"
                                    f"{json.dumps(ld)}</script></head><body></body></html>")
    return f"{base}/talk.html"


def test_yt_dlp_on_a_full_disk_fails_the_download_job(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    ffmpeg("-i", str(get_footage("pianist")), "-t", "8", "-c:v", "libx264", "-preset", "veryfast", "-crf", "10",
           str(site / "talk.mp4"))
    size = (site / "talk.mp4").stat().st_size
    with serve(site) as base, tmpfs(tmp_path / "disk", 32 * MiB) as disk:
        url = _page(site, base, size)
        fill(disk, leave=size // 3)
        with pytest.raises(faults.MachineFault) as caught:  # the space check off: yt-dlp meets ENOSPC
            download.run([{"source_id": "talk", "url": url, "clip_type": "r"}], disk / "download" / "u0.tsv",
                         retries=2, backoff_seconds=0, check_free_space=False)
        assert caught.value.errno == errno.ENOSPC and "yt-dlp" in str(caught.value)
        assert not (disk / "download" / "u0.tsv").exists()  # no record of a failed source
        # the check on: stopped before yt-dlp writes, from the size the page announces
        (disk / ".ballast").unlink()
        _page(site, base, 64 * MiB)
        with pytest.raises(faults.MachineFault, match="not enough free space for the download of talk"):
            download.run([{"source_id": "talk", "url": url, "clip_type": "r"}], disk / "download" / "u0.tsv",
                         retries=1, backoff_seconds=0)
        # with room, the same source downloads
        _page(site, base, size)
        records = download.run([{"source_id": "talk", "url": url, "clip_type": "r"}], disk / "download" / "u0.tsv",
                               retries=1, backoff_seconds=0)
        assert records[0]["status"] == "ok"


def test_recorded_faults_of_an_earlier_version_are_found_and_removed(tmp_path):
    root = tmp_path / "results"
    (root / "download").mkdir(parents=True)
    (root / "frames").mkdir()
    (root / "clips" / "u1").mkdir(parents=True)
    cols = "source_id\tstatus\treason\tpath\tclip_type\n"
    (root / "download" / "u0.tsv").write_text(
        cols + "a\tok\t\tdownload/videos/a.mp4\tr\nb\tfailed\tunable to write data: [Errno 28] No space left on "
        "device\t\tr\nc\tfailed\tHTTP Error 404: Not Found\t\tr\n")
    (root / "download" / "u1.tsv").write_text(cols + "d\tfailed\tHTTP Error 404: Not Found\t\tr\n")
    (root / "frames" / "u1.tsv").write_text(
        "clip_id\tframes\tstatus\treason\tpath\nd_000\t0\tfailed\tclips/u1/d_000.mp4: ffmpeg failed: Task finished "
        "with error code: -28 (No space left on device)\tu1/d_000\n")
    (root / "clips" / "u1" / "status.tsv").write_text("source_id\tstatus\treason\tclips\tdropped\nd\tok\t\t1\t0\n")
    found = recorded_faults.find(root, ["u0", "u1"])
    assert [(r.stage, r.unit, r.item) for r in found] == [("download", "u0", "b"), ("frames", "u1", "d_000")]
    said = []
    recorded_faults.repair(root, ["u0", "u1"], dry_run=True, say=said.append)
    assert len(said) == 2 and (root / "download" / "u0.tsv").exists()
    recorded_faults.repair(root, ["u0", "u1"], say=said.append)
    assert not (root / "download" / "u0.tsv").exists() and not (root / "frames" / "u1.tsv").exists()
    assert (root / "download" / "u1.tsv").exists() and (root / "clips" / "u1" / "status.tsv").exists()
