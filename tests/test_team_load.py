"""Team mode under load, and a SIGKILL in the middle of it.

The server runs as a subprocess (``python -m microg4m.annotate.team serve``) over a
results folder of 24 clips, its accounts made with the command line. Three annotators
send a few hundred changes from 12 threads at once, in a bounded loop. Afterwards every
acknowledged change is in the history with its values, the history replays to exactly
the files the workflow reads (``microg4m team rebuild --check``), and after a SIGKILL no
acknowledged change is missing.

The server is the production one (waitress, microg4m/annotate/serving.py), started with
SIGINT ignored, as a background job of a non-interactive shell is (nohup, many CI
runners), and stopped with SIGTERM, as systemd or a container runtime stops it: a clean
stop (exit 0) with the files in step.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from microg4m import cli
from microg4m.annotate.team import accounts
from microg4m.annotate.team.db import connect
from microg4m.formats.manifest import write_manifest

from team_setup import Client, password
from test_annotate_store import LABEL_MAP

ANNOTATORS = ("alice", "bob", "carol")
THREADS_PER_ANNOTATOR = 4
OPS_PER_THREAD = 25  # 3 * 4 * 25 = 300 changes
ACTIONS = (12, 14, 17, 79, 3, 11)


def build_many(root: Path, n: int = 24) -> Path:
    """Results of one source with ``n`` kept clips; clip i has 1 + i % 2 persons (no video files)."""
    clips = [f"src_{i:03d}" for i in range(n)]
    (root / "clips" / "src").mkdir(parents=True)
    write_manifest(root / "clips" / "src" / "manifest.tsv", [
        dict(clip_id=c, source_id="src", clip_type="r", seq=i, start_s=3 * i, frames=90, width=320, height=240,
             status="ok", reason="") for i, c in enumerate(clips)])
    (root / "filter").mkdir()
    (root / "filter" / "src.tsv").write_text("clip_id\tperson_share\tcuts\tkeep\treason\n"
                                             + "".join(f"{c}\t1.0000\t\t1\tkept\n" for c in clips))
    rows = ["video_id,frame_id,person_id,xmin,ymin,xmax,ymax,conf"]
    for i, c in enumerate(clips):
        for p in range(1, 2 + i % 2):
            rows += [f"{c},{f},{p},{10 * p}.00,20.00,{10 * p + 80}.00,200.00,0.9000" for f in range(1, 91)]
    (root / "tracks").mkdir()
    (root / "tracks" / "src.csv").write_text("\n".join(rows) + "\n")
    return root


def team(workdir: Path, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "microg4m.cli", "team", *args], cwd=workdir, input=stdin,
                          capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"team {' '.join(args)}: {proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A working directory: config, results, and the accounts made with the command line."""
    work = tmp_path_factory.mktemp("load")
    build_many(work / "results")
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump({
        "results": "results", "filter": {"screening": "annotations/screening_excluded.txt"},
        "export": {"actions": "annotations/actions.csv", "label_map": str(LABEL_MAP)},
        "team": {"database": "annotations/team.sqlite", "annotators_per_clip": 2}}))
    out = team(work, "user", "add", "alice", "--password-stdin", stdin=password("alice") + "\n")
    assert out.stdout.strip() == "added annotator alice"
    conn = connect(work / "annotations" / "team.sqlite")  # the others without a process each
    for name in ANNOTATORS[1:]:
        accounts.add_user(conn, name, "annotator", password(name))
    conn.close()
    return work


@pytest.fixture
def workdir(template, tmp_path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(template, work)
    return work


def ignore_sigint() -> None:
    """In the child before exec: SIGINT ignored, as a shell's background job has it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Server:
    def __init__(self, workdir: Path, *args: str):
        self.workdir = workdir
        self.log = open(workdir / "server.log", "a")
        self.proc = subprocess.Popen([sys.executable, "-m", "microg4m.annotate.team", "serve", "--port", "0", *args],
                                     cwd=workdir, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     preexec_fn=ignore_sigint)
        line = self.proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, (line, (workdir / "server.log").read_text())
        self.port = int(m.group(1))

    def stop(self, sig=signal.SIGTERM) -> str:
        """Stop it (SIGTERM) and check that it stopped cleanly; returns its log."""
        self.proc.send_signal(sig)
        self.proc.wait(timeout=60)
        self.log.close()
        log = (self.workdir / "server.log").read_text()
        assert self.proc.returncode == 0, (self.proc.returncode, log)
        assert "stopped cleanly" in log and "database closed, files in step" in log, log
        return log


def run_load(port: int, stop_after: int | None = None, kill=None) -> list[dict]:
    """The bounded load loop; returns every acknowledged change."""
    clients = {n: Client(port).login(n) for n in ANNOTATORS}
    queues = {n: {c["clip_id"]: c["persons"] for c in clients[n].request("GET", "/api/state")[1]["clips"]}
              for n in ANNOTATORS}
    acks: list[dict] = []
    lock = threading.Lock()
    dead = threading.Event()

    def worker(name: str, j: int):
        """Changes the clips j, j + 4, ... of the annotator's queue: each request a real change."""
        rng = random.Random(f"{name}-{j}")
        client = clients[name]
        mine = sorted(queues[name].items())[j::THREADS_PER_ANNOTATOR]
        acts = {(c, p): [] for c, persons in mine for p in persons}
        excluded: set[str] = set()
        for _ in range(OPS_PER_THREAD):
            if dead.is_set():
                return
            clip, persons = rng.choice(mine)
            try:
                if clip in excluded or rng.random() < 0.12:
                    excluded ^= {clip}
                    status, out, _ = client.post("/api/screening", {"clip_id": clip, "excluded": clip in excluded,
                                                                    "reason": f"r{rng.randint(0, 9)}"})
                    ack = {"who": name, "clip": clip, "person": 0, "kind": "exclusion",
                           "after": json.dumps(out.get("reason")) if clip in excluded else None}
                else:
                    person = rng.choice(persons)
                    have = acts[(clip, person)]
                    if len(have) < 5 and (not have or rng.random() < 0.6):
                        op, action = "add", rng.choice([a for a in ACTIONS if a not in have])
                    else:
                        op, action = "remove", rng.choice(have)
                    status, out, _ = client.post("/api/actions", {"clip_id": clip, "person_id": person,
                                                                  "action": action, "op": op})
                    acts[(clip, person)] = out.get("actions", have)
                    ack = {"who": name, "clip": clip, "person": person, "kind": "actions",
                           "after": json.dumps(out.get("actions"), separators=(",", ":")) if out.get("actions")
                           else None}
            except OSError:  # the server is gone: this change was not acknowledged
                dead.set()
                return
            assert status == 200, out
            ack["change"] = out["change"]  # the number of the change among the annotator's own
            assert ack["change"], (ack, out)  # every request here changes something
            with lock:
                acks.append(ack)
                if stop_after is not None and len(acks) == stop_after:
                    kill()

    threads = [threading.Thread(target=worker, args=(n, j)) for n in ANNOTATORS for j in range(THREADS_PER_ANNOTATOR)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return acks


def agree_on_a_clip(port: int) -> list[dict]:
    """Two annotators who share a clip both exclude it, one after the other, after the load:
    whatever the threads' interleaving left, that clip is then agreed on. Returns the two
    acknowledged changes."""
    clients = {n: Client(port).login(n) for n in ANNOTATORS}
    queues = {n: {c["clip_id"] for c in clients[n].request("GET", "/api/state")[1]["clips"]} for n in ANNOTATORS}
    pairs = [(a, b) for i, a in enumerate(ANNOTATORS) for b in ANNOTATORS[i + 1:] if queues[a] & queues[b]]
    assert pairs, queues  # 24 clips, 2 annotators each: some two share a clip
    a, b = pairs[0]
    clip = sorted(queues[a] & queues[b])[0]
    acks = []
    for name in (a, b):
        status, out, _ = clients[name].post("/api/screening", {"clip_id": clip, "excluded": True, "reason": "agreed"})
        assert status == 200 and out["change"], out
        acks.append({"who": name, "clip": clip, "person": 0, "kind": "exclusion", "after": json.dumps(out["reason"]),
                     "change": out["change"]})
    return acks


def history(workdir: Path) -> dict[int, sqlite3.Row]:
    conn = sqlite3.connect(workdir / "annotations" / "team.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return {r["seq"]: r for r in conn.execute("SELECT * FROM changes")}
    finally:
        conn.close()


def layers(rows: dict) -> dict[str, list]:
    """layer -> its history rows in order (an annotator's n-th change is the n-th row of their layer)."""
    out: dict[str, list] = {}
    for seq in sorted(rows):
        out.setdefault(rows[seq]["layer"], []).append(rows[seq])
    return out


def check_acknowledged(acks: list[dict], rows: dict) -> None:
    """Every acknowledged change is in the history, as it was acknowledged; the final
    labels are @auto's only."""
    mine = layers(rows)
    for a in acks:
        if not a["change"]:
            continue  # nothing to change (e.g. adding an action the person had)
        assert a["change"] <= len(mine.get(a["who"], [])), f"acknowledged change {a} missing from the history"
        r = mine[a["who"]][a["change"] - 1]
        assert (r["who"], r["layer"], r["clip_id"], r["person_id"], r["kind"], r["after"]) == (
            a["who"], a["who"], a["clip"], a["person"], a["kind"], a["after"]), (dict(r), a)
    assert {r["who"] for r in mine.get("@final", [])} <= {"@auto"}


def test_load_history_replays_to_the_files(workdir, monkeypatch, capsys):
    server = Server(workdir)
    try:
        acks = run_load(server.port)
        assert len(acks) == len(ANNOTATORS) * THREADS_PER_ANNOTATOR * OPS_PER_THREAD  # 300 changes, all at once
        acks += agree_on_a_clip(server.port)
    finally:
        server.stop()
    rows = history(workdir)
    changes = acks
    check_acknowledged(acks, rows)
    # nothing in the annotators' layers that was not acknowledged (every request got its answer)
    assert {(layer, i + 1) for layer, rs in layers(rows).items() if layer != "@final" for i in range(len(rs))} == {
        (a["who"], a["change"]) for a in acks}
    # the latest acknowledged value of each key is the value in the database
    latest = {}
    for a in sorted(changes, key=lambda a: (a["who"], a["change"])):
        latest[(a["who"], a["kind"], a["clip"], a["person"])] = a["after"]
    conn = sqlite3.connect(workdir / "annotations" / "team.sqlite")
    current = {k[:4]: k[4] for k in conn.execute("SELECT layer, kind, clip_id, person_id, value FROM current "
                                                 "WHERE layer != '@final'")}
    conn.close()
    assert current == {k: v for k, v in latest.items() if v is not None}
    assert any(r["layer"] == "@final" for r in rows.values())  # some clips were agreed on (one at least)
    out = team(workdir, "rebuild", "--check")
    assert json.loads(out.stdout)["differ"] == []
    # a file that differs from the history is found, and rebuilt from it (the same command, in this process)
    actions = workdir / "annotations" / "actions.csv"
    good = actions.read_bytes()
    actions.write_bytes(good + b"src_000,r,1,3\n")
    monkeypatch.chdir(workdir)
    assert cli.main(["team", "rebuild", "--check"]) == 1
    assert "differ from the history: annotations/actions.csv" in capsys.readouterr().err
    assert cli.main(["team", "rebuild"]) == 0
    assert actions.read_bytes() == good
    capsys.readouterr()
    assert cli.main(["team", "history", "--who", "alice"]) == 0
    hist = capsys.readouterr().out.splitlines()
    assert hist[0].split("\t")[:3] == ["seq", "at", "who"]
    assert len(hist) - 1 == sum(r["who"] == "alice" for r in rows.values())


def test_sigkill_in_the_middle_loses_no_acknowledged_change(workdir):
    server = Server(workdir)
    try:
        acks = run_load(server.port, stop_after=120, kill=lambda: os.kill(server.proc.pid, signal.SIGKILL))
    finally:
        server.proc.wait(timeout=60)
        server.log.close()
    assert server.proc.returncode == -signal.SIGKILL
    assert 120 <= len(acks) < len(ANNOTATORS) * THREADS_PER_ANNOTATOR * OPS_PER_THREAD  # killed mid-load
    rows = history(workdir)
    check_acknowledged(acks, rows)
    # a restart writes the files from the history (the kill may have come between commit and file)
    again = Server(workdir)
    again.stop()
    assert json.loads(team(workdir, "rebuild", "--check").stdout)["differ"] == []
    assert len(history(workdir)) >= len(rows)
