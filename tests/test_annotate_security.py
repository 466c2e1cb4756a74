"""Single-user mode against a careless or hostile client: real HTTP against the real
command line (``python -m microg4m.annotate`` in a subprocess, on a free port).

* the access token: any request without it is refused (401) and writes nothing, also
  from another account of this machine (``runuser -u nobody``); the printed address sets
  it in a cookie (HttpOnly, SameSite=Strict) and sends the browser on without it;
* the Origin check compares the port too (a page on another port of 127.0.0.1 is another
  site);
* the framing headers; the body size limit and the JSON depth limit (400, not a
  RecursionError's 500); text that no file can take (422 naming the field).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess

import pytest

from team_setup import post_oversized
from test_annotate_guard import ACTION, address_of, start

NESTED = "[" * 100_000 + "]" * 100_000  # Python's JSON parser gives up (RecursionError) long before


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("security")
    proc = start(tmp)
    try:
        port, token = address_of(proc)
        yield port, token, tmp / "ann"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def call(port: int, method: str, path: str, headers: dict | None = None, body: bytes | str | None = None):
    """One raw HTTP request; (status, headers, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers={"Host": f"127.0.0.1:{port}", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp, resp.read()
    finally:
        conn.close()


def as_json(body: bytes) -> dict:
    return json.loads(body)


JSON = {"Content-Type": "application/json"}


def test_a_request_without_the_token_is_refused(page):
    port, token, ann = page
    bearer = {"Authorization": f"Bearer {token}"}
    for method, path, body in (("GET", "/api/state", None), ("GET", "/api/clips/dancer_000", None),
                               ("GET", "/clip/dancer_000/frame/1.jpg", None), ("GET", "/clip/dancer_000/frames", None),
                               ("GET", "/api/vqa", None),
                               ("POST", "/api/actions", json.dumps(ACTION)),
                               ("POST", "/api/screening", json.dumps({"clip_id": "dancer_001", "excluded": True}))):
        for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Cookie": f"microg4m-annotate-{port}=wrong"}):
            status, _, raw = call(port, method, path, {**JSON, **headers}, body)
            assert status == 401 and "no valid access token" in as_json(raw)["error"], (method, path, headers, raw)
    status, _, raw = call(port, "GET", "/")
    assert status == 401 and b"open the address" in raw
    assert not ann.exists()  # nothing written
    # with the token: the header (scripts), or the printed address, which sets the cookie (browsers)
    assert call(port, "GET", "/api/state", bearer)[0] == 200
    status, resp, _ = call(port, "GET", f"/?token={token}")
    assert status == 303 and resp.getheader("Location") == "/"  # the token leaves the address bar
    cookie = resp.getheader("Set-Cookie")
    attrs = {a.strip().lower() for a in cookie.split(";")}
    assert cookie.startswith(f"microg4m-annotate-{port}={token};") and {"httponly", "samesite=strict"} <= attrs
    jar = {"Cookie": cookie.split(";", 1)[0]}
    assert call(port, "GET", "/", jar)[0] == 200
    status, _, raw = call(port, "POST", "/api/actions", {**JSON, **jar}, json.dumps(ACTION))
    assert status == 200 and as_json(raw)["actions"] == [12]
    status, _, raw = call(port, "POST", "/api/actions", {**JSON, **bearer}, json.dumps(dict(ACTION, op="remove")))
    assert status == 200 and as_json(raw)["actions"] == []


def _as_nobody_works() -> bool:
    return (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("runuser") is not None
            and shutil.which("curl") is not None)


@pytest.mark.skipif(not _as_nobody_works(), reason="needs root, runuser and curl (the other account: nobody)")
def test_another_account_of_this_machine_cannot_write(page):
    """The issue's case: ``runuser -u nobody -- curl -X POST http://127.0.0.1:PORT/api/screening``."""
    port, _, ann = page
    before = {p.name: p.read_bytes() for p in ann.glob("*")} if ann.exists() else {}
    for method, path in (("POST", "/api/screening"), ("GET", "/api/state")):
        out = subprocess.run(["runuser", "-u", "nobody", "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                              "-X", method, "-H", "Content-Type: application/json",
                              *(["--data", json.dumps({"clip_id": "dancer_001", "excluded": True,
                                                       "reason": "by nobody"})] if method == "POST" else []),
                              f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, timeout=60)
        assert out.stdout == "401", (path, out.stdout, out.stderr)
    assert ({p.name: p.read_bytes() for p in ann.glob("*")} if ann.exists() else {}) == before


def test_the_origin_must_be_this_servers_own_with_its_port(page):
    port, token, ann = page
    headers = {**JSON, "Authorization": f"Bearer {token}"}
    for origin in (f"http://127.0.0.1:{port + 1}", "http://127.0.0.1", f"https://127.0.0.1:{port}",
                   f"http://localhost:{port}"):  # another port, scheme or name is another origin
        status, _, raw = call(port, "POST", "/api/actions", {**headers, "Origin": origin}, json.dumps(ACTION))
        assert status == 403 and as_json(raw)["error"].startswith(f"refused: Origin {origin!r}"), (origin, raw)
    status, _, raw = call(port, "POST", "/api/actions", {**headers, "Origin": f"http://127.0.0.1:{port}"},
                          json.dumps(dict(ACTION, op="remove")))
    assert status == 200, raw


def test_no_page_can_be_framed(page):
    port, token, _ = page
    for path in ("/", "/api/state"):
        _, resp, _ = call(port, "GET", path, {"Authorization": f"Bearer {token}"})
        assert resp.getheader("X-Frame-Options") == "DENY"
        assert resp.getheader("Content-Security-Policy") == "frame-ancestors 'none'"
        assert resp.getheader("X-Content-Type-Options") == "nosniff"


def test_body_limits_nested_json_and_text_no_file_can_take(page):
    port, token, ann = page
    auth = {"Authorization": f"Bearer {token}"}
    before = {p.name: p.read_bytes() for p in ann.glob("*")} if ann.exists() else {}
    status_line = post_oversized(port, "/api/actions", auth)  # 2 MiB: above the 1 MiB limit
    assert status_line.startswith(b"HTTP/1.1 413"), status_line  # refused before the body is read
    status, _, raw = call(port, "POST", "/api/actions", {**JSON, **auth}, NESTED)
    assert status == 400 and "nested" in as_json(raw)["error"], raw[:300]
    deep = {**ACTION, "x": json.loads("[" * 40 + "]" * 40)}  # parses, but deeper than a page ever sends
    status, _, raw = call(port, "POST", "/api/actions", {**JSON, **auth}, json.dumps(deep))
    assert status == 400 and "nested more than 16 deep" in as_json(raw)["error"]
    for path, body, field in (("/api/screening", {"clip_id": "dancer_001", "excluded": True, "reason": "x\ud800"},
                               "reason holds a lone surrogate U+D800"),
                              ("/api/screening", {"clip_id": "dancer_001", "excluded": True, "reason": "x\r"},
                               "reason holds the control character U+000D"),
                              ("/api/vqa", {"clip_id": "dancer_001", "caption": "A\ud800", "qa_pairs": [],
                                            "reviewed": True}, "caption holds a lone surrogate")):
        status, _, raw = call(port, "POST", path, {**JSON, **auth}, json.dumps(body))
        assert status == 422 and field in as_json(raw)["error"], (path, raw)
    assert ({p.name: p.read_bytes() for p in ann.glob("*")} if ann.exists() else {}) == before
