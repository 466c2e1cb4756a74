"""Who may talk to the annotation server: real HTTP requests against the real command line
(``python -m microg4m.annotate`` in a subprocess, on a free port).

A web page on another site can make the browser of someone who has the page open send
requests to 127.0.0.1 under the page's own host name (DNS rebinding: ``Host:
evil.example``), or post to it from its own origin. Such requests are refused (403) and
write nothing; the loopback names, the ``--host`` given and ``--allowed-host`` names work.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from test_annotate_store import LABEL_MAP, build_results

ACTION = {"clip_id": "dancer_000", "person_id": 1, "action": 12, "op": "add"}


def start(tmp_path: Path, *args: str) -> subprocess.Popen:
    """Start the page's command line on a free port, over its own results folder."""
    res = build_results(tmp_path / "results")
    return subprocess.Popen(
        [sys.executable, "-m", "microg4m.annotate", "--results", str(res), "--label-map", str(LABEL_MAP),
         "--actions", str(tmp_path / "ann" / "actions.csv"), "--screening", str(tmp_path / "ann" / "excluded.txt"),
         "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


def address_of(proc: subprocess.Popen) -> tuple[int, str]:
    """(port, access token) from the line "microg4m annotate: http://HOST:PORT/?token=TOKEN  (Ctrl-C to stop)"."""
    line = proc.stdout.readline()
    m = re.search(r"http://\S+:(\d+)/\?token=([A-Za-z0-9_-]+)", line)
    if not m:
        proc.kill()
        raise AssertionError(f"the server did not start: {line!r} {proc.stderr.read()}")
    return int(m.group(1)), m.group(2)


def port_of(proc: subprocess.Popen) -> int:
    return address_of(proc)[0]


def _can_bind(addr: str) -> bool:
    with socket.socket() as s:
        try:
            s.bind((addr, 0))
        except OSError:
            return False
    return True


OTHER = "127.0.0.2"  # a loopback address that is not the default, given with --host


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """The default server (127.0.0.1, one --allowed-host) and, where it can bind, one
    started with ``--host 127.0.0.2``; both start at once."""
    tmp = tmp_path_factory.mktemp("guard")
    procs = {"default": start(tmp / "default", "--allowed-host", "annotate.lab.example")}
    if _can_bind(OTHER):
        procs["other"] = start(tmp / "other", "--host", OTHER)
    try:
        yield {k: (*address_of(p), tmp / k / "ann" / "actions.csv") for k, p in procs.items()}
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=30)


TOKEN: dict[int, str] = {}  # port -> the access token its server printed


@pytest.fixture(scope="module")
def server(servers):
    port, token, actions = servers["default"]
    TOKEN[port] = token
    return "127.0.0.1", port, actions


def request(addr: str, port: int, method: str, path: str, headers: dict, body=None):
    """One real HTTP request with exactly these headers (Host included) and the server's
    access token; (status, JSON)."""
    conn = http.client.HTTPConnection(addr, port, timeout=30)
    data = json.dumps(body) if body is not None else None
    hdrs = dict(headers, **({"Content-Type": "application/json"} if body is not None else {}))
    if port in TOKEN:
        hdrs.setdefault("Authorization", f"Bearer {TOKEN[port]}")
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp.status, (json.loads(text) if resp.getheader("Content-Type", "").startswith("application/json")
                         else text)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}",
                                  "localhost.evil.example", "0.0.0.0:{port}", ""])
def test_a_foreign_host_is_refused_for_every_request(server, host):
    addr, port, actions = server
    host = host.format(port=port)
    for method, path, body in (("GET", "/", None), ("GET", "/api/state", None),
                               ("GET", "/clip/dancer_000/frame/1.jpg", None), ("POST", "/api/actions", ACTION)):
        status, reply = request(addr, port, method, path, {"Host": host}, body)
        assert status == 403, (host, path, status, reply)
        assert reply["error"].startswith(f"refused: Host {host!r} is not an address this server answers to")
    assert not actions.exists()


def test_dns_rebinding_the_issue_case_writes_nothing(server):
    """The measured attack: a label change with Host and Origin of the attacker's site."""
    addr, port, actions = server
    status, reply = request(addr, port, "POST", "/api/actions",
                            {"Host": "evil.example", "Origin": "http://evil.example"}, ACTION)
    assert status == 403 and not actions.exists()


@pytest.mark.parametrize("origin", ["http://evil.example", "http://evil.example:{port}", "null",
                                    "http://127.0.0.1.evil.example:{port}", "file://"])
def test_a_post_from_a_foreign_origin_is_refused(server, origin):
    addr, port, actions = server
    origin = origin.format(port=port)
    for path, body in (("/api/actions", ACTION), ("/api/screening", {"clip_id": "dancer_001", "excluded": True})):
        status, reply = request(addr, port, "POST", path, {"Host": f"127.0.0.1:{port}", "Origin": origin}, body)
        assert status == 403 and reply["error"].startswith(f"refused: Origin {origin!r} is not this server"), reply
    assert not actions.exists() and not actions.with_name("excluded.txt").exists()
    # reading is not state-changing: a GET with a foreign Origin is served (the browser's
    # same-origin policy keeps the answer from the foreign page)
    assert request(addr, port, "GET", "/api/state", {"Host": f"127.0.0.1:{port}", "Origin": origin})[0] == 200


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LOCALHOST:{port}",
                                  "127.0.0.1", "annotate.lab.example:{port}"])
def test_loopback_names_and_allowed_hosts_are_served(server, host):
    addr, port, actions = server
    host = host.format(port=port)
    status, state = request(addr, port, "GET", "/api/state", {"Host": host})
    assert status == 200 and state["total"] == 4
    status, page = request(addr, port, "GET", "/", {"Host": host})
    assert status == 200 and "<html" in page.lower()
    origin = f"http://{host}"
    for add in (True, False):  # the page's own origin may change labels, and no Origin (curl) too
        status, reply = request(addr, port, "POST", "/api/actions", {"Host": host, **({"Origin": origin} if add else {})},
                                dict(ACTION, op="add" if add else "remove"))
        assert status == 200, reply
        assert reply["actions"] == ([12] if add else [])
    assert actions.read_text() == "video_id,movie_or_real,person_id,action\n"


def test_the_host_given_is_served_and_others_refused(servers):
    if "other" not in servers:
        pytest.skip(f"needs the loopback address {OTHER} (Linux)")
    port, TOKEN[port], actions = servers["other"]
    addr = OTHER
    assert request(addr, port, "GET", "/api/state", {"Host": f"{addr}:{port}"})[0] == 200
    status, reply = request(addr, port, "POST", "/api/actions",
                            {"Host": f"{addr}:{port}", "Origin": f"http://{addr}:{port}"}, ACTION)
    assert status == 200 and reply["actions"] == [12]
    assert request(addr, port, "GET", "/api/state", {"Host": f"localhost:{port}"})[0] == 200  # loopback names too
    assert request(addr, port, "GET", "/api/state", {"Host": f"evil.example:{port}"})[0] == 403
    assert request(addr, port, "GET", "/api/state", {"Host": f"annotate.lab.example:{port}"})[0] == 403  # not given
    status, _ = request(addr, port, "POST", "/api/actions",
                        {"Host": f"{addr}:{port}", "Origin": "http://evil.example"}, dict(ACTION, op="remove"))
    assert status == 403 and "12" in actions.read_text()
