"""The production server (waitress, microg4m/annotate/serving.py) as a lab runs it: a
subprocess stopped by a signal.

* SIGTERM while a request is in flight (its body half sent): new connections are refused
  at once, the request is read to the end and answered, an idle keep-alive connection
  does not hold the stop, the process exits 0, the change is in the history, the
  database is closed (its write-ahead log merged and removed) and the files are in step;
* SIGINT stops it the same way, unless the process was started with SIGINT ignored (a
  background job): then it keeps serving until SIGTERM;
* single-user mode (``microg4m annotate``) stops cleanly on SIGTERM too.
"""

from __future__ import annotations

import http.client
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from team_setup import Client
from test_annotate_guard import address_of
from test_annotate_store import LABEL_MAP, build_results
from test_team_load import Server, team, template  # noqa: F401  (fixture)


@pytest.fixture
def workdir(template, tmp_path) -> Path:  # noqa: F811
    work = tmp_path / "work"
    shutil.copytree(template, work)
    return work


def wait_for_exit(proc: subprocess.Popen, seconds: float) -> int | None:
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_sigterm_finishes_the_request_in_flight_then_stops_cleanly(workdir):
    server = Server(workdir)
    alice = Client(server.port).login("alice")
    clip = alice.request("GET", "/api/state")[1]["clips"][0]["clip_id"]
    idle = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)  # keep-alive, left open
    idle.request("GET", "/login", headers={"Host": f"127.0.0.1:{server.port}"})
    idle.getresponse().read()
    body = json.dumps({"clip_id": clip, "caption": "A person stands in front of a wall.",
                       "qa_pairs": [{"Q": "Where does the person stand?", "A": "In front of a wall."}],
                       "reviewed": True, "base": None, "from_draft": False}).encode()
    head = (f"POST /api/vqa HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nCookie: {alice.cookie}\r\n"
            f"X-CSRF-Token: {alice.csrf}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(head + body[:20])  # the request is in flight: half its body sent
    time.sleep(0.3)
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert server.proc.poll() is None  # still finishing the request
    assert refused(server.port)  # but no new connection
    sock.sendall(body[20:])
    raw = b""
    while chunk := sock.recv(65536):
        raw += chunk
    sock.close()
    status_line, _, rest = raw.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 200"), raw
    answer = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert answer["entry"]["caption"] == "A person stands in front of a wall." and answer["change"] == 1
    assert wait_for_exit(server.proc, 30) == 0
    assert time.monotonic() - t0 < 10  # the idle keep-alive connection did not hold it for 30 s
    server.log.close()
    log = (workdir / "server.log").read_text()
    assert "stopped cleanly: 1 of 1 requests in flight finished (0 abandoned" in log, log
    assert "database closed, files in step" in log
    idle.close()
    db = workdir / "annotations" / "team.sqlite"
    assert not Path(f"{db}-wal").exists()  # the last connection closed: the log merged into the database
    import sqlite3

    conn = sqlite3.connect(db)
    row = conn.execute("SELECT who, kind, clip_id FROM changes WHERE layer = 'alice' ORDER BY seq").fetchone()
    conn.close()
    assert row == ("alice", "text", clip)
    assert json.loads(team(workdir, "rebuild", "--check").stdout)["differ"] == []


def test_sigint_stops_it_unless_it_started_with_sigint_ignored(workdir):
    # started in the foreground (an interactive Ctrl-C), even when pytest itself runs with SIGINT ignored
    proc = subprocess.Popen([sys.executable, "-m", "microg4m.annotate.team", "serve", "--port", "0"], cwd=workdir,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert "http://127.0.0.1:" in proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    assert wait_for_exit(proc, 30) == 0
    assert "stopped cleanly" in proc.stderr.read()
    proc.stdout.close(), proc.stderr.close()
    # started as a background job (SIGINT ignored): SIGINT leaves it serving, SIGTERM stops it
    server = Server(workdir)
    server.proc.send_signal(signal.SIGINT)
    assert wait_for_exit(server.proc, 1.5) is None
    assert Client(server.port).request("GET", "/login")[0] == 200
    server.stop(signal.SIGTERM)


def test_single_user_mode_stops_cleanly_on_sigterm(tmp_path):
    res = build_results(tmp_path / "results")
    proc = subprocess.Popen(
        [sys.executable, "-m", "microg4m.annotate", "--results", str(res), "--label-map", str(LABEL_MAP),
         "--actions", str(tmp_path / "ann" / "actions.csv"), "--screening", str(tmp_path / "ann" / "excluded.txt"),
         "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    port, token = address_of(proc)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/api/actions", body=json.dumps({"clip_id": "dancer_000", "person_id": 1, "action": 12,
                                                           "op": "add"}),
                 headers={"Content-Type": "application/json", "Host": f"127.0.0.1:{port}",
                          "Authorization": f"Bearer {token}"})
    assert conn.getresponse().status == 200
    conn.close()
    proc.send_signal(signal.SIGTERM)
    assert wait_for_exit(proc, 30) == 0, proc.stderr.read()
    proc.stdout.close(), proc.stderr.close()
    assert (tmp_path / "ann" / "actions.csv").read_text().endswith("dancer_000,r,1,12\n")
