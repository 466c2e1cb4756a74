"""Reason classes of failed downloads, on yt-dlp's own exceptions and messages.

Unit part: each failure is raised inside a real YoutubeDL by a small extractor that calls
yt-dlp's own helpers (raise_no_formats, raise_login_required, raise_geo_restricted) the
way yt-dlp's YouTube extractor does, with the texts that extractor matches on (each is
checked to be in the installed yt-dlp's source) and, for the parts YouTube's servers
send, the messages users reported (linked). yt-dlp wraps each in its DownloadError,
exactly as a download sees it. "Requested format is not available" comes from yt-dlp's
real format selection.

YouTube part: yt-dlp's own YouTube extractor, unchanged, against a fake YouTube on
127.0.0.1 (tests/fake_youtube.py) that answers with YouTube's playability status for
each case, or refuses the player API with HTTP 429/403/503.

Loopback part: real downloads through download.fetch from a real HTTP server on
127.0.0.1 (HTTP 429, 403, 404, 503, a closed port, a server that never answers): the
network classes, the record's fields and which classes are retried.
"""

from __future__ import annotations

import inspect
import time

import pytest
import yt_dlp
from yt_dlp.extractor.common import InfoExtractor
from yt_dlp.extractor.youtube import YoutubeIE
from yt_dlp.extractor.youtube import _video as youtube_source
from yt_dlp.utils import DownloadError, remove_end

import fake_youtube
from conftest import ffmpeg, get_footage
from loopback import closed_port, serve
from microg4m.stages import download
from microg4m.formats import download_errors
from microg4m.formats.records import read_records

YOUTUBE_SOURCE = inspect.getsource(youtube_source)

# What YouTube's servers say (the playability "reason"), as users of yt-dlp reported it.
BOT = "Sign in to confirm you\u2019re not a bot. This helps protect our community. Learn more"  # yt-dlp 11981, 15527
AGE = "Sign in to confirm your age. This video may be inappropriate for some users."  # feed-master 72
PRIVATE = "Private video. Sign in if you've been granted access to this video"  # yt-dlp 4455
REMOVED = "Video unavailable. This video has been removed by the uploader"
TERMINATED = ("Video unavailable. This video is no longer available because the YouTube account associated "
              "with this video has been terminated.")
MEMBERS = "Join this channel to get access to members-only content like this video, and other exclusive perks."
GEO = "The uploader has not made this video available in your country"
TRY_LATER = "This content isn't available, try again later."


def _youtube_reason(ie, reason: str) -> str:
    """The message yt-dlp's YouTube extractor makes of a playability reason (its _real_extract)."""
    assert "if 'sign in' in reason.lower():" in YOUTUBE_SOURCE
    assert "This content isn't available, try again later\" in reason" in YOUTUBE_SOURCE
    if "sign in" in reason.lower():
        reason = remove_end(reason, "This helps protect our community. Learn more")
        return f"{remove_end(reason.strip(), '.')}. {ie._youtube_login_hint}"
    if TRY_LATER.rstrip(".") in reason:  # yt-dlp's own rewrite of it (the start of it)
        rewrite = "has been rate-limited by YouTube for up to an hour. It is recommended to use `-t sleep`"
        assert rewrite in YOUTUBE_SOURCE
        return f"{remove_end(reason.strip(), '.')}. The current session {rewrite}"
    return reason


class _FailingIE(InfoExtractor):
    """Fails like yt-dlp's YouTube extractor: ``microg4mtest:<case>``."""

    _VALID_URL = r"microg4mtest:(?P<id>\w+)"
    IE_NAME = "youtube"

    def _real_extract(self, url):
        case = self._match_id(url)
        youtube = YoutubeIE(self._downloader)
        if case == "geo":  # YoutubeIE: subreason "The uploader has not made ..." -> raise_geo_restricted
            assert "The uploader has not made this video available in your country" in YOUTUBE_SOURCE
            self.raise_geo_restricted(GEO, countries=["DE"], metadata_available=True)
        if case == "login":
            self.raise_login_required(method="cookies")
        if case == "blocked":
            msg = "All player responses are invalid. Your IP is likely being blocked by Youtube"
            assert msg in YOUTUBE_SOURCE
            self.raise_no_formats(msg, expected=True)
        reason = {"bot": BOT, "age": AGE, "private": PRIVATE, "removed": REMOVED, "terminated": TERMINATED,
                  "members": MEMBERS, "rate": TRY_LATER}[case]
        self.raise_no_formats(_youtube_reason(youtube, reason), expected=True, video_id="abcdefghijk")


def _raised(case: str) -> DownloadError:
    with yt_dlp.YoutubeDL({"quiet": True, "no_warnings": True}) as ydl:
        ydl.add_info_extractor(_FailingIE(ydl))
        with pytest.raises(DownloadError) as info:
            ydl.extract_info(f"microg4mtest:{case}", ie_key="_Failing")
    return info.value


CASES = [("bot", "bot_check"), ("login", "bot_check"), ("blocked", "bot_check"), ("age", "age_restricted"),
         ("private", "private"), ("members", "private"), ("removed", "unavailable"), ("terminated", "unavailable"),
         ("geo", "geo_blocked"), ("rate", "rate_limited")]


@pytest.mark.parametrize("case,expected", CASES)
def test_each_youtube_failure_gets_its_class(case, expected):
    exc = _raised(case)
    message = str(exc).removeprefix("ERROR: ")
    assert message.startswith("[youtube] ")
    assert download_errors.classify(message, exc).name == expected
    # a record keeps only the message: the message alone gives the same class
    assert download_errors.classify(message).name == expected
    assert download_errors.BY_NAME[expected].advice


def test_the_bot_check_message_is_the_one_users_see():
    message = str(_raised("bot"))
    assert "Sign in to confirm you\u2019re not a bot. Use --cookies-from-browser or --cookies" in message
    assert "This helps protect our community" not in message


def test_requested_format_not_available_from_ytdlps_format_selection(tmp_path):
    src = tmp_path / "clip.mp4"
    ffmpeg("-i", str(get_footage("pianist")), "-t", "1", "-c:v", "libx264", "-preset", "ultrafast", str(src))
    opts = {"quiet": True, "no_warnings": True, "enable_file_urls": True, "format": "bv*[height>=2000]"}
    with yt_dlp.YoutubeDL(opts) as ydl, pytest.raises(DownloadError) as info:
        ydl.extract_info(src.as_uri(), download=False)
    assert "Requested format is not available" in str(info.value)
    assert download_errors.classify(str(info.value), info.value).name == "format_unavailable"
    # through the download stage: recorded with its class, not retried
    rec = download.fetch("big", src.as_uri(), "r", tmp_path / "d", format="bv*[height>=2000]", retries=3,
                         backoff_seconds=0.01)
    assert rec["status"] == "failed" and rec["reason_class"] == "format_unavailable" and rec["attempts"] == 1


def test_unrecognised_messages_are_other_and_retried():
    cls = download_errors.classify("something yt-dlp never said")
    assert cls.name == "other" and cls.retry


# ---------------------------------------------------------------- loopback HTTP server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    with serve(root) as base:
        yield base


@pytest.mark.parametrize("path,expected,retried", [
    ("/status/429", "rate_limited", False),
    ("/status/403", "bot_check", False),
    ("/status/404", "unavailable", False),
    ("/status/410", "unavailable", False),
    ("/status/503", "network", True),
])
def test_http_statuses_through_the_download_stage(server, tmp_path, path, expected, retried):
    rec = download.fetch("s", f"{server}{path}", "r", tmp_path / "d", retries=2, backoff_seconds=0.01)
    assert rec["status"] == "failed", rec
    assert f"HTTP Error {path.rsplit('/', 1)[1]}" in rec["reason"]
    assert rec["reason_class"] == expected and rec["advice"] == download_errors.BY_NAME[expected].advice
    assert download_errors.classify(rec["reason"]).name == expected  # from the recorded message alone too
    assert rec["attempts"] == (2 if retried else 1)


def test_a_closed_port_is_a_network_failure_retried(tmp_path):
    rec = download.fetch("s", f"http://127.0.0.1:{closed_port()}/a.mp4", "r", tmp_path / "d", retries=2,
                         backoff_seconds=0.01)
    assert rec["status"] == "failed" and "Connection refused" in rec["reason"]
    assert rec["reason_class"] == "network" and rec["attempts"] == 2


def test_a_server_that_never_answers_is_a_network_failure(server, tmp_path):
    t = time.monotonic()
    rec = download.fetch("s", f"{server}/hang", "r", tmp_path / "d", retries=1, socket_timeout=1)
    assert rec["status"] == "failed" and rec["reason_class"] == "network", rec
    assert "timed out" in rec["reason"].lower()
    assert time.monotonic() - t < 30


def test_the_class_survives_the_status_table(server, tmp_path):
    out = tmp_path / "d" / "u.tsv"
    download.run([{"source_id": "a", "url": f"{server}/status/429", "clip_type": "r"},
                  {"source_id": "b", "url": str(tmp_path / "nope.mp4"), "clip_type": "m"}], out, retries=1)
    back = {r["source_id"]: r for r in read_records(out)}
    assert back["a"]["reason_class"] == "rate_limited" and "back off" in back["a"]["advice"]
    assert back["b"]["reason_class"] == "missing_file"


def test_local_failures_are_classed(tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("hello")
    rec = download.fetch("txt", str(text), "m", tmp_path / "d")
    assert rec["status"] == "failed" and rec["reason_class"] == "not_a_video"
    rec = download.fetch("gone", str(tmp_path / "gone.mp4"), "m", tmp_path / "d")
    assert rec["reason_class"] == "missing_file"


# ---------------------------------------------------------------- yt-dlp's YouTube extractor, unchanged


@pytest.fixture(scope="module")
def youtube(tmp_path_factory):
    """A fake YouTube on 127.0.0.1 (tests/fake_youtube.py) that yt-dlp reaches through its proxy option."""
    if not fake_youtube.available():
        pytest.skip("needs the openssl command (for the fake YouTube's certificate): apt-get install openssl")
    with fake_youtube.serve(tmp_path_factory.mktemp("fake_youtube")) as server:
        yield server


P = fake_youtube.playability
YOUTUBE_CASES = [
    ("bot", (200, P("LOGIN_REQUIRED", BOT.split(". This helps")[0], "This helps protect our community. Learn more")),
     "bot_check", "Sign in to confirm you\u2019re not a bot. Use --cookies-from-browser or --cookies"),
    ("age", (200, P("LOGIN_REQUIRED", "Sign in to confirm your age",
                    "This video may be inappropriate for some users.")),
     "age_restricted", "Sign in to confirm your age. This video may be inappropriate for some users. Use --cookies"),
    ("private", (200, P("LOGIN_REQUIRED", "Private video", "Sign in if you've been granted access to this video")),
     "private", PRIVATE),
    ("members", (200, P("UNPLAYABLE", MEMBERS)), "private", "members-only content"),
    ("removed", (200, P("ERROR", "Video unavailable", "This video has been removed by the uploader")),
     "unavailable", REMOVED),
    ("terminated", (200, P("ERROR", "Video unavailable", TERMINATED.split("Video unavailable. ")[1])),
     "unavailable", "has been terminated"),
    ("geo", (200, P("UNPLAYABLE", "Video unavailable", GEO)), "geo_blocked", GEO),
    ("rate", (200, P("UNPLAYABLE", TRY_LATER)), "rate_limited", "rate-limited by YouTube for up to an hour"),
    # the player API itself refusing: yt-dlp only warns, then fails with "Failed to extract any
    # player response"; the class comes from the HTTP error it warned of
    ("http429", (429, {"error": {"code": 429, "message": "Too Many Requests"}}), "rate_limited",
     "(yt-dlp warned: HTTP Error 429"),
    ("http403", (403, {"error": {"code": 403, "message": "Forbidden"}}), "bot_check", "(yt-dlp warned: HTTP Error 403"),
    ("http503", (503, {"error": {"code": 503}}), "network", "(yt-dlp warned: HTTP Error 503"),
]


@pytest.mark.parametrize("case,player,expected,said", YOUTUBE_CASES, ids=[c[0] for c in YOUTUBE_CASES])
def test_ytdlps_youtube_extractor_failures_get_their_class(youtube, tmp_path, case, player, expected, said):
    """yt-dlp's YouTube extractor, as a download runs it (the packaged Deno, our options and
    logger), against YouTube's answer for each case; only client configs are skipped (the
    fake serves none)."""
    youtube.player = player
    ylog = download.YtdlpLog()
    opts = download.ydl_options(str(tmp_path / "%(id)s.%(ext)s"), fmt=download.DEFAULT_FORMAT, proxy=youtube.proxy,
                                extractor_args={"youtube": {"player_skip": ["configs"]}})
    with yt_dlp.YoutubeDL(opts | {"nocheckcertificate": True, "logger": ylog}) as ydl, \
            pytest.raises(DownloadError) as info:
        ydl.extract_info("https://www.youtube.com/watch?v=SE4HsMi3KoU", download=True)
    reason = str(info.value).removeprefix("ERROR: ")
    cls, reason = download_errors.classify_attempt(reason, info.value, ylog.warnings)
    assert reason.startswith("[youtube] SE4HsMi3KoU: ") and said in reason, reason
    assert cls.name == expected, reason
    assert any(p.startswith("/youtubei/v1/player") for p in youtube.paths)  # it asked the player API


def test_a_setting_yt_dlp_cannot_serve_is_a_setup_failure(server, tmp_path):
    rec = download.fetch("s", f"{server}/status/404", "r", tmp_path / "d", impersonate="nosuchbrowser", retries=3)
    assert rec["status"] == "failed" and rec["attempts"] == 1, rec
    assert 'Impersonate target "nosuchbrowser" is not available' in rec["reason"]
    assert rec["reason_class"] == "setup"
    rec = download.fetch("s", f"{server}/status/404", "r", tmp_path / "d", cookies_from_browser="netscape")
    assert rec["reason_class"] == "setup" and rec["reason"].startswith("download.cookies_from_browser 'netscape'")
