"""What yt-dlp needs for today's YouTube, as yt-dlp options, and the check at start.

YouTube's player needs a JavaScript runtime to solve its challenges (yt-dlp issue 15012,
November 2025) and yt-dlp's challenge solver scripts (EJS). Both come from PyPI and are
pinned in pyproject.toml: ``deno`` ships the Deno binary, ``yt-dlp-ejs`` the scripts.
yt-dlp is pointed at that binary (its ``js_runtimes`` option), never at whatever ``deno``
is first on PATH. The YouTube options of the config (cookies, PO-token provider, player
client, impersonation) are translated here too; see docs/downloading.md.
"""

from __future__ import annotations

import logging
import optparse
import os
from importlib import metadata

log = logging.getLogger(__name__)

POT_PLUGIN = "bgutil-ytdlp-pot-provider"  # the PO-token provider plugin of download.po_token_provider
POT_EXTRACTOR_KEY = "youtubepot-bgutilhttp"  # its extractor arguments (base_url of its HTTP server)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def deno_binary() -> str | None:
    """The Deno binary of the ``deno`` package, or None when the package is missing."""
    try:
        import deno
    except ImportError:
        return None
    try:
        return str(deno.find_deno_bin())
    except (OSError, RuntimeError, FileNotFoundError):
        return None


def js_runtimes() -> dict:
    """yt-dlp's ``js_runtimes`` option: the packaged Deno (or yt-dlp's own search without it)."""
    path = deno_binary()
    return {"deno": {"path": path} if path else {}}


def runtime_info():
    """yt-dlp's own view of the JS runtime it is given (``JsRuntimeInfo`` or None)."""
    from yt_dlp.utils._jsruntime import DenoJsRuntime

    return DenoJsRuntime(path=deno_binary()).info


def ejs_versions() -> tuple[str | None, str]:
    """(installed yt-dlp-ejs version, the version this yt-dlp expects)."""
    from yt_dlp.extractor.youtube.jsc._builtin.vendor import VERSION

    return _version("yt-dlp-ejs"), VERSION


def problems(settings: dict | None = None) -> list[str]:
    """What stops yt-dlp from handling today's YouTube in full, one sentence each (empty: ready).

    Checked at the start of every download job (see download.run) and by the versions rule.
    """
    out = []
    info = runtime_info()
    if info is None:
        out.append("no JavaScript runtime: yt-dlp cannot solve YouTube's challenges (formats will be missing); "
                   "install the pinned 'deno' package (pip install -e .)")
    elif not info.supported:
        out.append(f"Deno {info.version} at {info.path} is older than yt-dlp supports; install the pinned 'deno'")
    have, want = ejs_versions()
    if have is None:
        out.append("yt-dlp-ejs is not installed: yt-dlp falls back to its built-in challenge scripts; "
                   f"install yt-dlp-ejs=={want}")
    elif have.split(".")[:2] != want.split(".")[:2]:
        out.append(f"yt-dlp-ejs {have} does not match the {want} this yt-dlp expects; install yt-dlp-ejs=={want}")
    settings = settings or {}
    if settings.get("cookies") and not os.path.isfile(settings["cookies"]):
        # yt-dlp itself ignores a cookies file it cannot read, without a word
        out.append(f"download.cookies {settings['cookies']!r}: no such file; YouTube sees no signed-in session")
    if settings.get("cookies_from_browser"):
        try:
            browser_cookies(settings["cookies_from_browser"])
        except ValueError as exc:
            out.append(str(exc))
    if settings.get("po_token_provider") and _version(POT_PLUGIN) is None:
        out.append(f"download.po_token_provider is set but the plugin {POT_PLUGIN} is not installed "
                   "(pip install -e '.[youtube]')")
    if settings.get("impersonate"):
        problem = impersonate_problem(settings["impersonate"])
        if problem:
            out.append(problem)
    return out


def impersonate_problem(target: str) -> str | None:
    """Why yt-dlp cannot impersonate ``target`` here (curl_cffi missing ...), or None."""
    import yt_dlp
    from yt_dlp.networking.impersonate import ImpersonateTarget

    wanted = ImpersonateTarget.from_str(str(target).lower())
    with yt_dlp.YoutubeDL({"quiet": True, "no_warnings": True}) as ydl:
        if ydl._impersonate_target_available(wanted):  # yt-dlp's own test (its --list-impersonate-targets)
            return None
    return (f"download.impersonate {target!r}: yt-dlp has no request handler that can impersonate it "
            "(install curl-cffi: pip install -e '.[youtube]'), or set download.impersonate: null")


def browser_cookies(spec: str) -> tuple:
    """``BROWSER[+KEYRING][:PROFILE][::CONTAINER]`` as yt-dlp's own command line parses it."""
    import yt_dlp

    try:
        parsed = yt_dlp.parse_options(["--ignore-config", "--cookies-from-browser", str(spec)])
    except (optparse.OptParseError, SystemExit) as exc:  # yt-dlp's parser names the problem
        said = str(exc).strip().splitlines()[-1].split("error: ", 1)[-1] if str(exc).strip() else ""
        raise ValueError(f"download.cookies_from_browser {spec!r}: {said or 'not a browser yt-dlp can read'} "
                         "(e.g. firefox, chrome, chrome:Profile 1)") from None
    return parsed.ydl_opts["cookiesfrombrowser"]


def options(*, cookies=None, cookies_from_browser=None, player_client=None, po_token_provider=None,
            extractor_args=None, impersonate=None) -> dict:
    """The yt-dlp options of the JS runtime and the YouTube settings of the config."""
    opts = {"js_runtimes": js_runtimes()}
    if cookies:
        opts["cookiefile"] = str(cookies)
    if cookies_from_browser:
        opts["cookiesfrombrowser"] = browser_cookies(cookies_from_browser)
    args = {site: {k: [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in values.items()}
            for site, values in (extractor_args or {}).items()}
    if player_client:
        clients = [player_client] if isinstance(player_client, str) else list(player_client)
        args.setdefault("youtube", {})["player_client"] = [str(c) for c in clients]
    if po_token_provider:
        args.setdefault(POT_EXTRACTOR_KEY, {})["base_url"] = [str(po_token_provider)]
    if args:
        opts["extractor_args"] = args
    if impersonate:
        from yt_dlp.networking.impersonate import ImpersonateTarget

        opts["impersonate"] = ImpersonateTarget.from_str(str(impersonate).lower())
    return opts


def versions() -> list[tuple[str, str]]:
    """Rows for versions.tsv: yt-dlp, EJS (and the version yt-dlp expects), the JS runtime."""
    import yt_dlp.version

    have, want = ejs_versions()
    info = runtime_info()
    runtime = f"deno {info.version} ({info.path})" if info else "not found"
    return [("yt-dlp", yt_dlp.version.__version__),
            ("yt-dlp-ejs", f"{have or 'not installed'} (yt-dlp expects {want})"),
            ("js runtime", runtime),
            (POT_PLUGIN, _version(POT_PLUGIN) or "not installed"),
            ("curl-cffi", _version("curl-cffi") or _version("curl_cffi") or "not installed")]


DEFAULT_FORMAT = "bv*[height<=?480]+ba/b[height<=?480]"


def ydl_options(out_template: str, *, fmt, cookies=None, sleep_requests=0, sleep_interval=0,
                rate_limit=None, proxy=None, socket_timeout=20, **youtube) -> dict:
    """yt-dlp's options of a download (``youtube``: the settings of :func:`options`)."""
    from microg4m.common import media

    opts = {
        "format": fmt,
        "outtmpl": out_template,
        "merge_output_format": "mp4",
        "ffmpeg_location": media.ffmpeg_exe(),
        "enable_file_urls": True,  # local files given as file:// URLs
        "noplaylist": True,
        "quiet": True,
        "no_warnings": True,
        "noprogress": True,
        "retries": 3,
        "socket_timeout": socket_timeout,
        "overwrites": False,
        "continuedl": True,
        **options(cookies=cookies, **youtube),
    }
    if sleep_requests:
        opts["sleep_interval_requests"] = float(sleep_requests)
    if sleep_interval:
        opts["sleep_interval"] = float(sleep_interval)
    if rate_limit:
        from yt_dlp.utils import parse_bytes

        opts["ratelimit"] = parse_bytes(str(rate_limit))
    if proxy:
        opts["proxy"] = proxy
    return opts


class YtdlpLog:
    """yt-dlp's logger: its warnings go to the job's log and are kept, because a failure's
    cause may be in them only (YouTube's API answering HTTP 429 ends in "Failed to extract
    any player response")."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def debug(self, msg) -> None:
        pass

    info = debug

    def warning(self, msg) -> None:
        self.warnings.append(str(msg))
        log.info("yt-dlp warned: %s", msg)

    def error(self, msg) -> None:
        log.debug("yt-dlp: %s", msg)
