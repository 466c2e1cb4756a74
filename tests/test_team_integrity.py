"""Data integrity of team mode: text that no file can take is refused before anything is
stored, the database and the workflow's files stay in step when a file cannot be
written, and ``team rebuild`` mends a database written before the check.

The server is the production one, as a subprocess (``python -m microg4m.annotate.team
serve``), over the results folder of test_team_load.py; its requests are real HTTP.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from microg4m.annotate.team import history
from microg4m.annotate.team.db import FINAL, connect, transaction

from microg4m import cli
from team_setup import Client
from test_team_load import Server, template  # noqa: F401  (fixture)

LONE = "blurry\ud800"  # JSON allows the escape "\ud800"; UTF-8 cannot encode it


@pytest.fixture
def workdir(template, tmp_path, monkeypatch) -> Path:  # noqa: F811
    work = tmp_path / "work"
    shutil.copytree(template, work)
    monkeypatch.chdir(work)  # for the team commands run in this process (team())
    return work


@pytest.fixture
def team(capsys):
    """``microg4m team ARGS`` in this process (in the workdir): (exit code, stdout, stderr)."""
    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = cli.main(["team", *args])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def files(workdir: Path) -> dict[str, bytes | None]:
    ann = workdir / "annotations"
    return {n: (ann / n).read_bytes() if (ann / n).is_file() else None
            for n in ("actions.csv", "screening_excluded.txt", "vqa_reviews.json")}


def changes(workdir: Path) -> int:
    conn = sqlite3.connect(workdir / "annotations" / "team.sqlite")
    try:
        return conn.execute("SELECT COUNT(*) FROM changes").fetchone()[0]
    finally:
        conn.close()


def shared_clip(alice: Client, bob: Client) -> str:
    """A clip in both queues."""
    mine = {c["clip_id"] for c in alice.request("GET", "/api/state")[1]["clips"]}
    return sorted(mine & {c["clip_id"] for c in bob.request("GET", "/api/state")[1]["clips"]})[0]


def test_a_lone_surrogate_is_refused_and_the_server_starts_again(workdir, team):
    server = Server(workdir)
    try:
        alice, bob = Client(server.port).login("alice"), Client(server.port).login("bob")
        clip = shared_clip(alice, bob)
        before, n = files(workdir), changes(workdir)
        # the request (json.dumps sends the escape "\ud800"), and the other texts that reach a file
        for path, body, field in (
                ("/api/screening", {"clip_id": clip, "excluded": True, "reason": LONE}, "reason"),
                ("/api/screening", {"clip_id": clip, "excluded": True, "reason": "blurry\x1b[2J"}, "reason"),
                ("/api/vqa", {"clip_id": clip, "caption": "A person." + LONE, "qa_pairs": [], "reviewed": True,
                              "base": None}, "caption"),
                ("/api/vqa", {"clip_id": clip, "caption": "A person.", "qa_pairs": [{"Q": "Who?", "A": "A\x00"}],
                              "reviewed": True, "base": None}, "pair 1: A")):
            status, out, _ = alice.post(path, body)
            assert status == 422 and out["error"].startswith(f"{clip}: {field} holds" if path == "/api/vqa"
                                                             else f"{field} holds"), (path, out)
        assert files(workdir) == before and changes(workdir) == n  # nothing stored, nothing written
        # the honest changes that follow: both exclude the clip, the final exclusion reaches the file
        for who in (alice, bob):
            status, out, _ = who.post("/api/screening", {"clip_id": clip, "excluded": True, "reason": "blurry"})
            assert status == 200, out
        assert f"{clip}  # blurry\n" in (workdir / "annotations" / "screening_excluded.txt").read_text()
        # tab and newline are text (folded into one line), not refused
        assert alice.post("/api/screening", {"clip_id": clip, "excluded": True, "reason": "very\tblurry\n"})[0] == 200
    finally:
        server.stop()
    again = Server(workdir)  # a restart works, and the files are what the history gives
    assert Client(again.port).request("GET", "/login")[0] == 200
    again.stop()
    assert json.loads(team("rebuild", "--check")[1])["differ"] == []


def test_a_file_that_cannot_be_written_rolls_the_change_back_and_the_server_says_so_at_start(workdir, team):
    actions = workdir / "annotations" / "actions.csv"
    actions.mkdir(parents=True)  # not a file: nothing can be written there (even by root)
    server = Server(workdir)
    try:
        alice, bob = Client(server.port).login("alice"), Client(server.port).login("bob")
        clip = shared_clip(alice, bob)
        persons = alice.request("GET", f"/api/clips/{clip}")[1]["persons"]
        for p in persons:  # alice's own labels: no final change, saved
            assert alice.post("/api/actions", {"clip_id": clip, "person_id": p, "action": 12, "op": "add"})[0] == 200
        for p in persons[:-1]:
            assert bob.post("/api/actions", {"clip_id": clip, "person_id": p, "action": 12, "op": "add"})[0] == 200
        n = changes(workdir)
        # bob's last label makes them agree: the final labels cannot reach the file, so nothing is saved
        status, out, _ = bob.post("/api/actions", {"clip_id": clip, "person_id": persons[-1], "action": 12,
                                                   "op": "add"})
        assert status == 503 and "not saved (nothing was changed): cannot write" in out["error"], out
        assert "actions.csv" in out["error"] and changes(workdir) == n
        assert bob.request("GET", f"/api/clips/{clip}")[1]["actions"][str(persons[-1])] == []
    finally:
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=60)
        server.log.close()
    log = (workdir / "server.log").read_text()
    assert server.proc.returncode == 0, log
    assert "warning: cannot write" in log and "actions.csv" in log and "files NOT in step" in log, log
    actions.rmdir()
    assert json.loads(team("rebuild")[1])["differ"]  # the files are written now
    assert json.loads(team("rebuild", "--check")[1])["differ"] == []


def test_rebuild_mends_a_database_written_before_the_check(workdir, team):
    """A database in which the old server stored a lone surrogate (as main did, issue 34):
    serve says so and serves; rebuild --check fails naming it; rebuild mends it by @repair."""
    assert team("assign")[0] == 0  # the database as team mode starts it (assignments)
    db = workdir / "annotations" / "team.sqlite"
    conn = connect(db)
    clip = conn.execute("SELECT a.clip_id FROM assignments a JOIN assignments b ON a.clip_id = b.clip_id "
                        "WHERE a.annotator = 'alice' AND b.annotator = 'bob' ORDER BY a.clip_id").fetchone()[0]
    with transaction(conn):  # what the unchecked server wrote: the annotators' layers and the final one
        for layer in ("alice", "bob", FINAL):
            history.put(conn, "@auto" if layer == FINAL else layer, layer, "exclusion", clip, "r", 0, LONE)
    conn.close()
    server = Server(workdir)  # main exited 1 here ("'utf-8' codec can't encode character '\ud800'")
    try:
        assert Client(server.port).request("GET", "/login")[0] == 200
    finally:
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=60)
        server.log.close()
    log = (workdir / "server.log").read_text()
    assert "does not encode to UTF-8" in log and "run microg4m team rebuild" in log, log
    code, _, err = team("rebuild", "--check")
    assert code == 1 and "hold text no file can take" in err and "U+D800" in err
    out = json.loads(team("rebuild")[1])
    assert out["repaired"] == 3 and len(out["unwritable"]) == 3
    screening = (workdir / "annotations" / "screening_excluded.txt").read_text(encoding="utf-8")
    assert f"{clip}  # blurry\ufffd\n" in screening
    conn = connect(db)
    rows = [r for r in history.rows(conn, clip_id=clip) if r["who"] == "@repair"]
    assert {r["layer"] for r in rows} == {"alice", "bob", FINAL}  # appended; the old rows stay as they were
    assert len(history.rows(conn, clip_id=clip)) == 6
    conn.close()
    assert json.loads(team("rebuild", "--check")[1])["unwritable"] == []
    (workdir / "server.log").write_text("")
    assert "warning" not in Server(workdir).stop()  # a clean start and stop
