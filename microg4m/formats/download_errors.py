"""Why a download failed, as a reason class with advice (the ledger's ``reason_class``).

yt-dlp's messages say what YouTube or the network said; the class says what to do about
it. A local file's trouble is read from the message; else the class comes from the
exception yt-dlp raised (GeoRestrictedError, an HTTP status, a transport error), then an
HTTP status in the message, then its words, in the order of ``CLASSES`` (it matters
where messages overlap: YouTube's age check also says "Sign in", its rate limit "isn't
available"). The tests use yt-dlp's own extractor, exceptions and messages
(tests/test_download_errors.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from microg4m.common import faults

DOCS = "docs/downloading.md"


@dataclass(frozen=True)
class ReasonClass:
    name: str
    advice: str
    retry: bool  # whether another attempt within the job can help
    patterns: tuple[str, ...] = ()


CLASSES = (
    ReasonClass("not_a_video", "the file is not a video ffmpeg can read (empty, truncated, audio only ...): replace "
                "the file", False, (r"^not a video",)),
    ReasonClass("missing_file", "the local file is not there: put it at the path of the sources table (films: "
                "see README, \"The released MicroG-4M source list\") or fix the path", False,
                (r"^local file .* does not exist", r"no such file or directory")),
    ReasonClass("setup", "a setting or tool of this machine is wrong (see the reason): fix the config or install "
                "what it names", False, (r"impersonate target", r"cookies file", r"ffmpeg", r"cookie database",
                                         r"could not find .* cookies",
                                         r"failed to load cookies", r"^download\.")),
    ReasonClass("rate_limited", "YouTube or the server is rate-limiting this machine (HTTP 429): back off for up to "
                "an hour, then re-run with download.sleep_requests (e.g. 1.5), download.sleep_interval (e.g. 5) "
                "and fewer download jobs at once; cookies of a signed-in session help too", False,
                (r"http error 429", r"too many requests", r"rate.?limit", r"try again later")),
    ReasonClass("age_restricted", "age-restricted: give cookies of a YouTube account that has confirmed its age "
                "(download.cookies or download.cookies_from_browser)", False,
                (r"confirm your age", r"age.?restricted", r"inappropriate for some users", r"age.?verification",
                 r"age.?gate")),
    ReasonClass("geo_blocked", "blocked in this machine's country: set download.proxy to a proxy in a country where "
                "the video is available", False,
                (r"in your country", r"from your location", r"geo.?restrict", r"geo.?block")),
    ReasonClass("private", "private or for members only: only an account with access can fetch it (its cookies in "
                "download.cookies); otherwise drop the source", False,
                (r"private video", r"video is private", r"members.?only", r"join this channel")),
    ReasonClass("bot_check", "YouTube wants a signed-in session or a proof of origin: set download.cookies (a "
                "cookies.txt of a browser signed in to YouTube) or download.cookies_from_browser; a PO-token "
                f"provider (download.po_token_provider) may help; see {DOCS}", False,
                (r"not a bot", r"sign in", r"log ?in", r"captcha", r"ip is likely being blocked",
                 r"use --cookies", r"http error 403", r"forbidden", r"po token")),
    ReasonClass("format_unavailable", "no format matches download.format: list them with `yt-dlp -F URL`; on YouTube "
                "a missing JS runtime or EJS (see versions.tsv) or a missing PO token also hides formats", False,
                (r"requested format is not available", r"no video formats", r"no formats", r"challenge solving failed",
                 r"signature solving failed", r"format.+not available")),
    ReasonClass("unavailable", "the video is gone (removed, terminated, never existed): drop it from the sources "
                "table or find another copy", False,
                (r"unavailable", r"has been removed", r"no longer available", r"been terminated", r"does not exist",
                 r"http error 404", r"http error 410", r"not found", r"copyright", r"unsupported url",
                 r"is not a valid url",
                 r"isn't available", r"is not available")),
    ReasonClass("network", "a network failure: check the connection and download.proxy; the job retried with "
                "backoff (download.retries), so re-run later", True,
                (r"connection refused", r"timed out", r"timeout", r"name or service not known",
                 r"temporary failure in name resolution", r"network is unreachable", r"no route to host",
                 r"connection reset", r"connection aborted", r"remote end closed", r"incompleteread",
                 r"incomplete read", r"ssl", r"certificate", r"http error 5\d\d", r"unable to connect",
                 r"failed to resolve", r"getaddrinfo", r"unable to download")),
)
LOCAL = 2  # the first classes: trouble with a local file
# A fault of this machine (no space, quota, read-only or unwritable folder, I/O error, out of
# memory: microg4m.common.faults), not of the source: the download job fails with it and the
# next run fetches the source again; it is never a source's recorded reason. Checked first.
MACHINE = ReasonClass("machine", "a fault of this machine, not of the source (see the reason): fix it (free "
                      "space, permissions ...) and run again", False)
OTHER = ReasonClass("other", "not recognised: read the reason; re-run with `microg4m download -v` to see yt-dlp's "
                    "full output", True)
BY_NAME = {c.name: c for c in (MACHINE, *CLASSES, OTHER)}


def _http_status(exc) -> int | None:
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        return status
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def _causes(exc):
    """The exception and what it wraps (DownloadError.exc_info, ExtractorError.cause/exc_info)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        info = getattr(exc, "exc_info", None)
        nxt = info[1] if isinstance(info, tuple) and len(info) > 1 else None
        exc = nxt or getattr(exc, "cause", None) or exc.__cause__ or exc.__context__


def _status_class(status: int | None) -> ReasonClass | None:
    """The class of an HTTP status, where the status alone tells."""
    if status == 429:
        return BY_NAME["rate_limited"]
    if status in (404, 410):
        return BY_NAME["unavailable"]
    if status == 403:
        return BY_NAME["bot_check"]
    if status and status >= 500:
        return BY_NAME["network"]
    return None


def _from_exception(exc) -> ReasonClass | None:
    from yt_dlp.networking.exceptions import HTTPError, TransportError
    from yt_dlp.utils import GeoRestrictedError

    for e in _causes(exc):
        if isinstance(e, GeoRestrictedError):
            return BY_NAME["geo_blocked"]
        if isinstance(e, HTTPError) or (type(e).__name__ == "HTTPError" and _http_status(e)):
            found = _status_class(_http_status(e))
            if found is not None:
                return found
        if isinstance(e, TransportError):
            return BY_NAME["network"]
    return None


_HTTP_WARNING = re.compile(r"HTTP Error (\d{3})[^()]*")


def classify_attempt(reason: str, exc: BaseException | None, warnings: list[str]) -> tuple[ReasonClass, str]:
    """The class of a failed attempt and its reason; when the error itself tells nothing
    (yt-dlp's "Failed to extract any player response"), the last HTTP error yt-dlp warned
    of decides, and is added to the reason."""
    cls = classify(reason, exc)
    if cls is not OTHER:
        return cls, reason
    for warning in reversed(warnings):
        m = _HTTP_WARNING.search(warning)
        if m:
            found = classify(m.group(0).strip())
            if found is not OTHER:
                return found, f"{reason} (yt-dlp warned: {m.group(0).strip()})"
    return cls, reason


def classify(reason: str | None, exc: BaseException | None = None) -> ReasonClass:
    """The reason class of a failure: a fault of the machine (from the exception's errno or
    the message); a local file's trouble from the message; else from yt-dlp's exception
    when it tells, then the HTTP status in the message, then its words."""
    if (exc is not None and faults.errno_of(exc) is not None) or faults.errno_in_text(reason) is not None:
        return MACHINE
    text = (reason or "").lower().replace("\u2019", "'")
    text = re.sub(r"^(error: )?\[[^\]]+\] [^:\s]+: ", "", text)  # yt-dlp's "[youtube] <id>: " prefix
    for cls in CLASSES[:LOCAL]:  # a missing file:// source is a TransportError too
        if any(re.search(p, text) for p in cls.patterns):
            return cls
    if exc is not None:
        found = _from_exception(exc)
        if found is not None:
            return found
    status = re.search(r"http error (\d{3})", text)
    found = _status_class(int(status.group(1))) if status else None
    if found is not None:
        return found
    for cls in CLASSES[LOCAL:]:
        if any(re.search(p, text) for p in cls.patterns):
            return cls
    return OTHER
