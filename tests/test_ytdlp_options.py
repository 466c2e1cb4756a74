"""yt-dlp inside the project's environment finds the packaged JavaScript runtime and the
EJS challenge scripts (its own API and its verbose header), and takes the YouTube options."""

from __future__ import annotations

import json
import logging

import deno
import pytest
import yt_dlp
from yt_dlp.extractor.youtube import YoutubeIE
from yt_dlp.extractor.youtube.jsc._builtin.deno import DenoJCP
from yt_dlp.extractor.youtube.jsc._builtin.ejs import ScriptSource
from yt_dlp.extractor.youtube.jsc._builtin.vendor import VERSION as EJS_EXPECTED
from yt_dlp.extractor.youtube.jsc.provider import JsChallengeProviderError

import fake_youtube
import loopback
from microg4m.stages import download, versions
from microg4m.engines import ytdlp_options


class _Logger:
    """A yt-dlp logger (debug/info/warning/error) that keeps the lines."""

    def __init__(self):
        self.lines = []

    def debug(self, msg):
        self.lines.append(msg)

    info = warning = error = debug


def _ydl(**extra):
    opts = download.ydl_options("%(id)s.%(ext)s", fmt=download.DEFAULT_FORMAT, **extra)
    return yt_dlp.YoutubeDL(opts | {"quiet": True})


def test_ytdlp_is_given_the_packaged_deno():
    path = str(deno.find_deno_bin())
    assert ytdlp_options.js_runtimes() == {"deno": {"path": path}}
    with _ydl() as ydl:
        info = ydl._js_runtimes["deno"].info  # yt-dlp's own view of the runtime it was given
    assert info is not None and info.supported and info.path == path
    assert info.version.startswith("2.")


def test_the_verbose_header_names_the_js_runtime_and_ejs():
    logger = _Logger()
    opts = download.ydl_options("%(id)s.%(ext)s", fmt=download.DEFAULT_FORMAT)
    with yt_dlp.YoutubeDL(opts | {"verbose": True, "logger": logger, "quiet": False}):
        pass
    header = "\n".join(logger.lines)
    runtime = ytdlp_options.runtime_info()
    assert f"JS runtimes: deno-{runtime.version}" in header, header
    have, want = ytdlp_options.ejs_versions()
    assert have == want == EJS_EXPECTED
    assert f"yt_dlp_ejs-{have}" in header, header  # "Optional libraries: ..."


def test_ytdlps_challenge_solver_takes_the_ejs_scripts_from_the_package_and_runs_them_in_deno():
    with _ydl() as ydl:
        ie = YoutubeIE(ydl)
        provider = DenoJCP(ie=ie, logger=ie._jsc_director.logger if hasattr(ie, "_jsc_director") else _Logger(),
                           settings={})
        assert provider.is_available()
        core, lib = provider._core_script, provider._lib_script  # hash- and version-checked by yt-dlp
        assert core.source is lib.source is ScriptSource.PYPACKAGE and core.version == EJS_EXPECTED
        # the solver runs in the packaged Deno: given an empty player, the EJS script itself
        # rejects it ("unexpected structure", its own words), from inside Deno
        stdin = (f"{lib.code}\nObject.assign(globalThis, lib);\n{core.code}\n"
                 "console.log(JSON.stringify(jsc({type: 'player', player: '', requests: [], "
                 "output_preprocessed: false})));")
        with pytest.raises(JsChallengeProviderError, match="Error running deno process") as info:
            provider._run_js_runtime(stdin)
    assert "unexpected structure" in str(info.value) and "unexpected structure" in core.code


def test_the_start_check_finds_nothing_missing_here():
    assert ytdlp_options.problems({}) == []
    rows = dict(versions.collect())
    assert rows["yt-dlp"] == yt_dlp.version.__version__
    assert rows["yt-dlp-ejs"].startswith(EJS_EXPECTED)
    assert rows["js runtime"].startswith("deno 2.") and str(deno.find_deno_bin()) in rows["js runtime"]
    assert rows["yt-dlp set-up"] == "ready for YouTube"


def test_the_start_check_names_what_is_wrong(tmp_path, caplog):
    found = ytdlp_options.problems({"cookies": str(tmp_path / "cookies.txt"), "impersonate": "nosuchbrowser",
                                    "cookies_from_browser": "netscape"})
    assert any(p.startswith("download.cookies_from_browser 'netscape': unsupported browser") for p in found), found
    assert any("download.cookies" in p and "no such file" in p for p in found), found
    assert any("download.impersonate 'nosuchbrowser'" in p for p in found), found
    with caplog.at_level(logging.WARNING, logger="microg4m.stages.download"):
        download.check_setup({"cookies": str(tmp_path / "cookies.txt")})
    assert "yt-dlp set-up: download.cookies" in caplog.text


def test_youtube_options_become_ytdlp_options():
    opts = ytdlp_options.options(player_client=["default", "mweb"], po_token_provider="http://127.0.0.1:4416",
                                 extractor_args={"youtube": {"po_token": "mweb.gvs+TOKEN"}},
                                 cookies_from_browser="chrome:Profile 1", impersonate="chrome")
    assert opts["extractor_args"] == {"youtube": {"player_client": ["default", "mweb"], "po_token": ["mweb.gvs+TOKEN"]},
                                      "youtubepot-bgutilhttp": {"base_url": ["http://127.0.0.1:4416"]}}
    assert opts["cookiesfrombrowser"] == ("chrome", "Profile 1", None, None)
    assert str(opts["impersonate"]) == "chrome"
    with pytest.raises(ValueError, match="cookies_from_browser 'netscape': unsupported browser"):
        ytdlp_options.browser_cookies("netscape")


def test_the_pinned_ytdlp_accepts_them(tmp_path):
    """YoutubeDL takes every option (it raises on an impersonation target it cannot serve)."""
    cookies = tmp_path / "cookies.txt"
    cookies.write_text("# Netscape HTTP Cookie File\n")
    with _ydl(cookies=str(cookies), player_client="mweb", po_token_provider="http://127.0.0.1:4416",
              impersonate="chrome") as ydl:
        assert ydl.params["js_runtimes"]["deno"]["path"] == str(deno.find_deno_bin())
        assert ydl.params["extractor_args"]["youtube"]["player_client"] == ["mweb"]
        assert ydl.params["cookiefile"] == str(cookies)
        assert ydl._impersonate_target_available(ydl.params["impersonate"])  # curl-cffi, from .[youtube]


def test_the_po_token_plugin_is_loaded_by_ytdlp():
    from yt_dlp.extractor.youtube.pot._registry import _pot_providers

    with _ydl():
        names = [p.PROVIDER_NAME for p in _pot_providers.value.values()]
    assert any(n.startswith("bgutil") for n in names), names


def test_the_po_token_provider_setting_reaches_the_plugins_server(tmp_path):
    """yt-dlp's YouTube extractor against the fake YouTube (tests/fake_youtube.py), asked to
    fetch PO tokens: the bgutil plugin asks the server download.po_token_provider names."""
    if not fake_youtube.available():
        pytest.skip("needs the openssl command (for the fake YouTube's certificate)")
    (tmp_path / "pot").mkdir()
    (tmp_path / "pot" / "ping").write_text(json.dumps({"version": "2.0.2", "server_uptime": 1}))
    with fake_youtube.serve(tmp_path) as youtube, loopback.serve(tmp_path / "pot") as pot:
        youtube.player = (200, fake_youtube.playability("LOGIN_REQUIRED", "Sign in to confirm you\u2019re not a bot"))
        ylog = download.YtdlpLog()
        opts = download.ydl_options(str(tmp_path / "%(id)s.%(ext)s"), fmt=download.DEFAULT_FORMAT, proxy=youtube.proxy,
                                    po_token_provider=pot,
                                    extractor_args={"youtube": {"player_skip": ["configs"], "fetch_pot": ["always"]}})
        with yt_dlp.YoutubeDL(opts | {"nocheckcertificate": True, "logger": ylog}) as ydl, \
                pytest.raises(yt_dlp.utils.DownloadError):
            ydl.extract_info("https://www.youtube.com/watch?v=SE4HsMi3KoU", download=False)
    assert "/ping" in pot.paths  # the plugin checked the server given
    # and asked it for a token (this file server refuses the POST: yt-dlp warns, naming the provider)
    assert any("bgutil:http" in w and "/get_pot" in w for w in ylog.warnings), ylog.warnings
