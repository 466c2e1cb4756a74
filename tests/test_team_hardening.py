"""Team mode against a careless or hostile client, the smaller items of issue 34: real HTTP
against the team app on the production server (waitress, serving.py).

* the Origin check compares the port (login CSRF from a page on another port of the
  same host), and the login form's token is one the server handed out, good once;
* the database, its write-ahead log and shared memory, and its backups are 0600;
* the body size and JSON depth limits (413, 400; not a RecursionError's 500);
* a connection that never finishes its request head is closed after ``header_timeout``,
  so that half-sent requests cannot hold every connection;
* GET never writes (new clips of a re-run are assigned at a login or a write);
* names are matched whole (``alice\\n`` is no name).
"""

from __future__ import annotations

import os
import re
import socket
import stat
import time
from argparse import Namespace
from pathlib import Path

import pytest

from microg4m.annotate.team import accounts
from microg4m.annotate.team.server import create_app

from team_setup import Client, make_project, password, post_oversized, serving

NESTED = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def team(tmp_path):
    old = os.umask(0o022)  # a usual umask: files are world-readable unless made otherwise
    try:
        project = make_project(tmp_path, annotators=("alice", "bob"))
    finally:
        os.umask(old)
    with serving(create_app(project, {"127.0.0.1", "localhost"})) as port:
        yield project, port


def login_form(c: Client) -> str:
    _, page, resp = c.request("GET", "/login")
    c.cookie = resp.getheader("Set-Cookie").split(";", 1)[0]
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


def db_dump(project) -> list[str]:
    conn = project.connect()
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_origin_port_and_the_login_forms_token(team):
    project, port = team
    alice = Client(port).login("alice")
    clip = alice.request("GET", "/api/state")[1]["clips"][0]["clip_id"]
    change = {"clip_id": clip, "person_id": 1, "action": 12, "op": "add"}
    before = db_dump(project)
    # a page on another port of 127.0.0.1 (the login CSRF, and a post in the victim's session)
    other = f"http://127.0.0.1:{port + 1}"
    c = Client(port)
    token = login_form(c)
    status, page, resp = c.request("POST", "/login", form={"csrf": token, "name": "bob", "password": password("bob")},
                                   headers={"Origin": other})
    assert status == 403 and f"refused: Origin '{other}' is not this server" in page["error"]
    assert "microg4m-team=" not in (resp.getheader("Set-Cookie") or "")
    status, out, _ = alice.post("/api/actions", change, headers={"Origin": other})
    assert status == 403 and "Origin" in out["error"]
    assert db_dump(project) == before
    # a login form the server did not hand out (cookie and field made up alike), or one used twice
    c = Client(port)
    c.cookie = "__Host-microg4m-login=made-up-by-the-attacker"
    status, page, _ = c.request("POST", "/login", form={"csrf": "made-up-by-the-attacker", "name": "bob",
                                                         "password": password("bob")})
    assert status == 403 and "expired or came from elsewhere" in page
    c = Client(port)
    token = login_form(c)
    form = {"csrf": token, "name": "bob", "password": password("bob")}
    assert c.request("POST", "/login", form=form, headers={"Origin": f"http://127.0.0.1:{port}"})[0] == 303
    assert c.request("POST", "/login", form=form)[0] == 403  # good once
    # the page's own origin may post
    assert alice.post("/api/actions", change, headers={"Origin": f"http://127.0.0.1:{port}"})[0] == 200


def test_the_database_and_its_backups_are_private(team, tmp_path):
    project, port = team
    held = project.connect()  # an open connection keeps the -wal and -shm files
    try:
        Client(port).login("alice")  # the server writes (a session)
        db = project.db_path
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    finally:
        held.close()
    from microg4m.annotate.team.cli import _backup

    old = os.umask(0o022)
    try:
        out = _backup(project.settings, str(tmp_path / "copy.sqlite"))
    finally:
        os.umask(old)
    assert out["backup"].endswith("copy.sqlite") and stat.S_IMODE((tmp_path / "copy.sqlite").stat().st_mode) == 0o600


def test_body_limit_and_nested_json(team):
    project, port = team
    alice = Client(port).login("alice")
    before = db_dump(project)
    for path in ("/api/actions", "/api/screening", "/api/vqa"):
        status, out, _ = alice.post(path, None, headers={"Content-Type": "application/json"}, raw=NESTED)
        assert status == 400 and "nested" in out["error"], (path, out)
    status_line = post_oversized(port, "/api/actions", {"Cookie": alice.cookie, "X-CSRF-Token": alice.csrf})
    assert status_line.startswith(b"HTTP/1.1 413"), status_line  # refused before the body is read
    assert db_dump(project) == before


def test_half_sent_request_heads_do_not_hold_the_server(tmp_path):
    """More half-sent requests than the server takes connections: it closes them after
    header_timeout, and a real request is answered (the issue: held for 120 s)."""
    project = make_project(tmp_path)
    app = create_app(project, {"127.0.0.1", "localhost"})
    with serving(app, connection_limit=4, header_timeout=1.0) as port:
        slow = []
        for i in range(6):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(f"GET /login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())  # never ends
            slow.append(s)  # (the others send nothing at all)
        time.sleep(0.2)
        t0 = time.monotonic()
        status, page, _ = Client(port).request("GET", "/login")
        waited = time.monotonic() - t0
        assert status == 200 and "Log in" in page
        assert waited < 5, waited  # header_timeout (1 s) and a sweep, not channel_timeout (120 s)
        for s in slow:
            try:
                assert s.recv(1) == b""  # closed by the server
            except ConnectionResetError:
                pass
            s.close()


def test_get_never_writes(team):
    project, port = team
    alice, judy = Client(port).login("alice"), Client(port).login("judy")
    # a re-run of the workflow keeps a clip it rejected before: a new kept clip
    decisions = project.results.index.files(project.results.index.clip("dancer_002").unit).decisions
    decisions.write_text(decisions.read_text().replace("dancer_002\t1.0000\t\t0\tfew_persons",
                                                       "dancer_002\t1.0000\t\t1\tkept"))
    clip = alice.request("GET", "/api/state")[1]["clips"][0]["clip_id"]
    before = db_dump(project)
    for client, paths in ((alice, ["/", "/api/state", f"/api/clips/{clip}", "/api/vqa", f"/api/vqa/{clip}",
                                   "/api/state?annotator=alice"]),
                          (judy, ["/adjudicate", "/api/adjudication", f"/api/adjudication/{clip}",
                                  "/api/text-adjudication", f"/api/text-adjudication/{clip}",
                                  f"/api/history/{clip}", "/adjudicate/captions"]),
                          (Client(port), ["/login", "/", "/api/state"])):
        for path in paths:
            assert client.request("GET", path)[0] in (200, 302, 401), path
    assert db_dump(project) == before
    assert "dancer_002" not in {c["clip_id"] for c in alice.request("GET", "/api/state")[1]["clips"]}
    # a write assigns the new clip (as a login does)
    assert alice.post("/api/actions", {"clip_id": clip, "person_id": 1, "action": 12, "op": "add"})[0] == 200
    conn = project.connect()
    assert conn.execute("SELECT COUNT(*) FROM assignments WHERE clip_id = 'dancer_002'").fetchone()[0] == 2
    conn.close()
    assert "dancer_002" in {c["clip_id"] for c in alice.request("GET", "/api/state")[1]["clips"]}  # listed from then on


def test_names_are_matched_whole(tmp_path):
    from microg4m.annotate.options import actions_path

    project = make_project(tmp_path, annotators=(), adjudicators=())
    conn = project.connect()
    for name in ("alice\n", "alice\r\n", "\nalice", "al ice"):
        with pytest.raises(ValueError, match="user name"):
            accounts.add_user(conn, name, "annotator", "violet-kettle-drums-9")
        with pytest.raises(ValueError, match="--annotator"):
            actions_path(Namespace(annotator=name, actions=None))
    conn.close()
