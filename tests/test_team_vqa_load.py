"""Captions and QA pairs under load, and a SIGKILL in the middle of it (in the style of
test_team_load.py, on the same production server subprocess, stopped with SIGTERM).

Three reviewers send 300 caption/QA edits from 12 threads at once, each with the base of
the version it read, so every request is a real change; the texts come from a few
variants, so that the two reviewers of a clip often agree and their clip becomes final
at once (@auto) and is withdrawn again. Afterwards every acknowledged edit is in the
history with its values, nothing unacknowledged is, the history replays to exactly the
files the workflow reads (the reviews file included), and after a SIGKILL no
acknowledged edit is missing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import threading
from pathlib import Path

import pytest

from team_setup import Client
from test_team_load import ANNOTATORS, Server, history, layers, team, template  # noqa: F401  (fixture)

THREADS_PER_REVIEWER = 4
EDITS_PER_THREAD = 25  # 3 * 4 * 25 = 300 edits
CAPTIONS = ("A person in a grey shirt walks to the left.", "A person in a grey shirt walks to the left slowly.")
PAIRS = ([{"Q": "What does the person wear?", "A": "A grey shirt."},
          {"Q": "Where does the person walk?", "A": "To the left."}],
         [{"Q": "What does the person wear?", "A": "A grey shirt."},
          {"Q": "What is the name of the person?", "A": "Not mentioned"}])


@pytest.fixture
def workdir(template, tmp_path) -> Path:  # noqa: F811
    work = tmp_path / "work"
    shutil.copytree(template, work)
    return work


def run_edits(port: int, stop_after: int | None = None, kill=None) -> list[dict]:
    """The bounded edit loop; returns every acknowledged edit."""
    clients = {n: Client(port).login(n) for n in ANNOTATORS}
    queues = {n: [c["clip_id"] for c in clients[n].request("GET", "/api/state")[1]["clips"]] for n in ANNOTATORS}
    acks: list[dict] = []
    lock = threading.Lock()
    dead = threading.Event()

    def worker(name: str, j: int):
        rng = random.Random(f"text-{name}-{j}")
        client = clients[name]
        mine = sorted(queues[name])[j::THREADS_PER_REVIEWER]
        base: dict[str, str | None] = dict.fromkeys(mine)
        last: dict[str, tuple | None] = dict.fromkeys(mine)
        plan = [("random", rng.choice(mine)) for _ in range(EDITS_PER_THREAD)] + [("agree", c) for c in mine]
        for phase, clip in plan:
            if dead.is_set():
                return
            if phase == "agree":  # at the end every reviewer agrees on one text: every clip final
                text = (CAPTIONS[0], 0, True)
                if text == last[clip]:
                    continue
            else:
                while True:  # a real change every time
                    text = (rng.choice(CAPTIONS), rng.randrange(len(PAIRS)), rng.random() < 0.7)
                    if text != last[clip]:
                        break
            caption, k, reviewed = text
            body = {"clip_id": clip, "caption": caption, "qa_pairs": PAIRS[k], "reviewed": reviewed,
                    "base": base[clip], "from_draft": False}
            try:
                status, out, _ = client.post("/api/vqa", body)
            except OSError:  # the server is gone: this edit was not acknowledged
                dead.set()
                return
            assert status == 200, out
            assert out["change"], out  # every request here changes something
            assert "status" not in out and "seq" not in out  # blind: nothing about the co-reviewers
            base[clip], last[clip] = out["entry"]["updated"], text
            ack = {"who": name, "clip": clip, "change": out["change"], "phase": phase,
                   "after": {"caption": caption, "qa_pairs": PAIRS[k], "reviewed": reviewed, "draft": None,
                             "updated": out["entry"]["updated"]}}
            with lock:
                acks.append(ack)
                if stop_after is not None and len(acks) == stop_after:
                    kill()

    threads = [threading.Thread(target=worker, args=(n, j)) for n in ANNOTATORS for j in range(THREADS_PER_REVIEWER)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return acks


def check_acknowledged(acks: list[dict], rows: dict) -> None:
    """Every acknowledged edit is the reviewer's n-th row (n: the answer's ``change``); the
    final texts are @auto's only."""
    mine = layers(rows)
    for a in acks:
        assert a["change"] <= len(mine.get(a["who"], [])), f"acknowledged edit {a} missing from the history"
        r = mine[a["who"]][a["change"] - 1]
        assert (r["who"], r["layer"], r["kind"], r["clip_id"], r["person_id"]) == (a["who"], a["who"], "text",
                                                                                  a["clip"], 0), dict(r)
        assert json.loads(r["after"]) == a["after"]
    assert {(r["who"], r["kind"]) for r in mine.get("@final", [])} <= {("@auto", "text")}


def test_concurrent_caption_edits_are_all_in_the_history_and_replay_to_the_files(workdir):
    server = Server(workdir)
    try:
        acks = run_edits(server.port)
    finally:
        server.stop()  # SIGTERM: a clean stop
    rows = history(workdir)
    assert sum(a["phase"] == "random" for a in acks) == len(ANNOTATORS) * THREADS_PER_REVIEWER * EDITS_PER_THREAD
    check_acknowledged(acks, rows)
    assert {(layer, i + 1) for layer, rs in layers(rows).items() if layer != "@final" for i in range(len(rs))} == {
        (a["who"], a["change"]) for a in acks}  # nothing unacknowledged
    latest = {}
    for a in sorted(acks, key=lambda a: (a["who"], a["change"])):
        latest[(a["who"], a["clip"])] = a["after"]
    conn = sqlite3.connect(workdir / "annotations" / "team.sqlite")
    current = {(r[0], r[1]): json.loads(r[2]) for r in conn.execute(
        "SELECT layer, clip_id, value FROM current WHERE kind = 'text' AND layer != '@final'")}
    finals = {r[0]: json.loads(r[1]) for r in conn.execute(
        "SELECT clip_id, value FROM current WHERE kind = 'text' AND layer = '@final'")}
    conn.close()
    assert current == latest
    assert len(finals) == 24  # all agreed at the end
    assert any(r["after"] is None for r in layers(rows)["@final"])  # finals were withdrawn on the way
    reviews = json.loads((workdir / "annotations" / "vqa_reviews.json").read_text())["clips"]
    assert {c: (e["caption"], e["qa_pairs"]) for c, e in reviews.items()} == {
        c: (f["caption"], f["qa_pairs"]) for c, f in finals.items()}
    assert json.loads(team(workdir, "rebuild", "--check").stdout)["differ"] == []


def test_sigkill_in_the_middle_loses_no_acknowledged_edit(workdir):
    server = Server(workdir)
    try:
        acks = run_edits(server.port, stop_after=120, kill=lambda: os.kill(server.proc.pid, signal.SIGKILL))
    finally:
        server.proc.wait(timeout=60)
        server.log.close()
    assert server.proc.returncode == -signal.SIGKILL
    assert 120 <= sum(a["phase"] == "random" for a in acks) < len(ANNOTATORS) * THREADS_PER_REVIEWER * EDITS_PER_THREAD
    rows = history(workdir)
    check_acknowledged(acks, rows)
    # a restart writes the files from the history (the kill may have come between commit and file)
    Server(workdir).stop()
    assert json.loads(team(workdir, "rebuild", "--check").stdout)["differ"] == []
