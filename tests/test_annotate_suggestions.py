"""The VLM baseline's answers as suggestions on the labelling page (microg4m.annotate.suggestions),
single-user and team mode: shown, never saved by a GET, and what each save made of them
(accepted, edited, removed) recorded and reported.

The answers file is made by the real stage (``vlm_har.run``, as rule ``har_vlm`` runs it)
against the loopback stand-in server of tests/test_evaluate_vlm.py, over the default layout
(one unit of several sources, its plan ``units.tsv``). The stand-in answers: dancer_000
person 1 ``[12, 17]``, person 2 ``[14, 999]`` (999 dropped by the stage), dancer_001 person 1
``[12, 99]`` (99 is in the label map the stage was run with, not in the page's), film_000
person 1 text without JSON (failed).
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import pandas as pd
import pytest

from microg4m.annotate.app import create_app
from microg4m.annotate.suggestions import outcome, tally
from microg4m.annotate.team.db import connect
from microg4m.annotate.team.server import create_app as create_team_app
from microg4m.evaluate import vlm_har
from microg4m.formats.labels import format_label_map, read_label_map
from microg4m.formats.results_index import ResultsIndex

from team_setup import Client, history_rows, make_project, serving
from test_annotate_store import LABEL_MAP, build_results, clip_video, copies_of, token_client  # noqa: F401  (fixture)
from test_evaluate_vlm import FRAMES, MODEL, PROMPT, SIZE, settings
from vlm_stub import StubVLM

UNIT = "batch00000"
REPLIES = {("dancer_000", 1): "[12, 17]", ("dancer_000", 2): '{"actions": [14, 999]}',
           ("dancer_001", 1): "[12, 99]", ("film_000", 1): "I see a person floating."}
HEADER = "video_id,movie_or_real,person_id,action\n"


def reply(text, images):
    m = re.search(r"Clip: (\S+) person (\d+),", text)
    return REPLIES[(m.group(1), int(m.group(2)))]


@pytest.fixture(scope="module")
def answered(tmp_path_factory, clip_video):  # noqa: F811
    """A results folder (real clips) with the VLM's answers of its unit, from the real stage."""
    video, size = clip_video
    tmp = tmp_path_factory.mktemp("suggest")
    res = build_results(tmp / "results", clip_maker=copies_of(video, size), size=size)
    lmap = read_label_map(LABEL_MAP)
    other_map = tmp / "label_map_99.pbtxt"  # the answers were made with a label map that has id 99
    other_map.write_text(format_label_map(pd.concat([lmap, pd.DataFrame(
        [{"name": "float", "id": 99, "label_type": "PERSON_MOVEMENT"}])], ignore_index=True)) + "\n")
    index = ResultsIndex(res)
    with StubVLM(model=MODEL, api_key=None, frames=FRAMES, frame_size=SIZE, answer=reply) as stub:
        for unit in index.units():
            f = index.files(unit)
            vlm_har.run(f.manifest, f.decisions, f.final_tracks, other_map, f.har_vlm, **settings(stub.url))
    return res


def test_outcome_and_tally():
    assert outcome([12, 17], [17, 12]) == "accepted"
    assert outcome([12, 17], [12]) == "edited" and outcome([12], [12, 14]) == "edited"
    assert outcome([12, 17], [14]) == "removed" and outcome([12], []) == "removed"
    t = tally(["accepted", "accepted", "edited", "removed"])
    assert t == {"suggestions": 4, "suggestions_accepted": 2, "suggestions_edited": 1, "suggestions_removed": 1,
                 "suggestions_accepted_share": 0.5, "suggestions_edited_share": 0.25,
                 "suggestions_removed_share": 0.25}
    assert tally([])["suggestions_accepted_share"] is None


def single_user(tmp_path, res):
    ann = tmp_path / "annotations"
    app = create_app(str(res), str(ann / "actions.csv"), str(ann / "screening_excluded.txt"), str(LABEL_MAP), "ann1")
    return token_client(app), ann


def save(client, clip, person, op, **body):
    r = client.post("/api/actions", json={"clip_id": clip, "person_id": person, "op": op, **body})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def test_single_user_shows_suggestions_saves_only_on_a_click_and_counts_outcomes(tmp_path, answered):
    client, ann = single_user(tmp_path, answered)
    actions, log = ann / "actions.csv", ann / "actions.suggestions.tsv"
    clip = client.get("/api/clips/dancer_000").get_json()
    assert clip["actions"] == {"1": [], "2": []}  # suggested, not saved
    assert {p: s["actions"] for p, s in clip["suggestions"].items()} == {"1": [12, 17], "2": [14]}
    assert {s["model"] for s in clip["suggestions"].values()} == {MODEL}
    # failed answers and ids outside the page's label map: no suggestion (and no crash)
    assert client.get("/api/clips/dancer_001").get_json()["suggestions"] == {}
    assert client.get("/api/clips/film_000").get_json()["suggestions"] == {}
    state = client.get("/api/state").get_json()
    assert state["suggestions"] == tally([]) and state["done"] == 0
    assert any("dancer_001 person 1: action id(s) [99] not in the label map" in p for p in state["problems"])
    assert not ann.exists()  # GETs wrote nothing

    # person 1: the suggestion saved as it is (the page's "accept": one save of the set)
    assert save(client, "dancer_000", 1, "set", actions=[12, 17]) == {
        "clip_id": "dancer_000", "person_id": 1, "actions": [12, 17], "outcome": "accepted"}
    assert save(client, "dancer_000", 1, "set", actions=[17, 12])["outcome"] is None  # no change: nothing recorded
    # person 2: another action than the suggested one, then the suggested one too
    assert save(client, "dancer_000", 2, "add", action=11)["outcome"] == "removed"
    assert client.get("/api/state").get_json()["suggestions"] == tally(["accepted", "removed"])
    assert save(client, "dancer_000", 2, "add", action=14)["outcome"] == "edited"
    # a person without a suggestion: nothing recorded
    assert save(client, "dancer_001", 1, "add", action=12)["outcome"] is None
    assert actions.read_text() == HEADER + ("dancer_000,r,1,12\ndancer_000,r,1,17\ndancer_000,r,2,11\n"
                                            "dancer_000,r,2,14\ndancer_001,r,1,12\n")
    rows = pd.read_csv(log, sep="\t", dtype=str)
    assert rows[["annotator", "clip_id", "person_id", "suggested", "saved", "outcome"]].values.tolist() == [
        ["ann1", "dancer_000", "1", "12 17", "12 17", "accepted"],
        ["ann1", "dancer_000", "2", "14", "11", "removed"],
        ["ann1", "dancer_000", "2", "14", "11 14", "edited"]]
    assert set(rows["model"]) == {MODEL}
    summary = client.get("/api/state").get_json()["suggestions"]
    assert summary == tally(["accepted", "edited"])  # the latest outcome of each person
    assert summary["suggestions_accepted_share"] == 0.5


def test_set_is_checked_like_add(tmp_path, answered):
    client, ann = single_user(tmp_path, answered)
    for body, status, message in (({"actions": [12, 2]}, 422, "unknown action id 2"),
                                  ({"actions": "12"}, 400, "actions must be a list"),
                                  ({"actions": [11, 12, 14, 17, 79, 80]}, 409, "at most 5")):
        r = client.post("/api/actions", json={"clip_id": "dancer_000", "person_id": 1, "op": "set", **body})
        assert r.status_code == status and message in r.get_json()["error"]
    assert not ann.exists()


def test_without_answers_the_page_is_as_before(tmp_path, answered):
    res = tmp_path / "results"
    shutil.copytree(answered, res)
    shutil.rmtree(res / "har_vlm")
    client, ann = single_user(tmp_path, res)
    clip = client.get("/api/clips/dancer_000").get_json()
    assert clip["suggestions"] == {} and clip["actions"] == {"1": [], "2": []}
    state = client.get("/api/state").get_json()
    assert state["problems"] == [] and state["suggestions"]["suggestions"] == 0
    assert save(client, "dancer_000", 1, "add", action=12)["outcome"] is None
    assert not (ann / "actions.suggestions.tsv").exists()
    # a file that is no answers file: named among the problems, no suggestion, no crash
    (res / "har_vlm").mkdir()
    (res / "har_vlm" / f"{UNIT}.json").write_text("{not json")
    assert client.get("/api/clips/dancer_000").get_json()["suggestions"] == {}
    problems = client.get("/api/state").get_json()["problems"]
    assert len(problems) == 1 and "not a VLM answers file" in problems[0] and UNIT in problems[0]


def test_suggestions_can_be_turned_off(tmp_path, answered):
    """Config ``annotate.suggestions: false``: the answers are there, the page shows none."""
    ann = tmp_path / "annotations"
    app = create_app(str(answered), str(ann / "actions.csv"), str(ann / "screening_excluded.txt"), str(LABEL_MAP),
                     suggestions=False)
    client = token_client(app)
    assert client.get("/api/clips/dancer_000").get_json()["suggestions"] == {}
    assert client.get("/api/state").get_json()["problems"] == []
    assert save(client, "dancer_000", 1, "set", actions=[12, 17])["outcome"] is None
    assert not (ann / "actions.suggestions.tsv").exists()
    project = make_project(tmp_path / "team", results=answered, suggestions=False)
    with serving(create_team_app(project, {"127.0.0.1"})) as port:
        status, clip, _ = Client(port).login("alice").request("GET", "/api/clips/dancer_000")
    assert status == 200 and clip["suggestions"] == {}


# ---------------------------------------------------------------- team mode


def test_team_records_outcomes_in_the_history_and_reports_them(tmp_path, answered):
    project = make_project(tmp_path, results=answered)  # alice and bob both label every kept clip
    with serving(create_team_app(project, {"127.0.0.1"})) as port:
        alice, bob = Client(port).login("alice"), Client(port).login("bob")
        before = len(history_rows(project))
        status, clip, _ = alice.request("GET", "/api/clips/dancer_000")
        assert status == 200 and {p: s["actions"] for p, s in clip["suggestions"].items()} == {"1": [12, 17], "2": [14]}
        status, state, _ = alice.request("GET", "/api/state")
        assert state["suggestions"]["suggestions"] == 0
        assert any("[99] not in the label map" in p for p in state["problems"])
        assert len(history_rows(project)) == before  # GETs wrote nothing
        for who, person, op, body in ((alice, 1, "set", {"actions": [12, 17]}), (alice, 2, "set", {"actions": [14]}),
                                      (bob, 1, "add", {"action": 12}), (bob, 2, "add", {"action": 11}),
                                      (bob, 1, "add", {"action": 79}), (alice, 1, "set", {"actions": [12, 17]})):
            status, out, _ = who.post("/api/actions", {"clip_id": "dancer_000", "person_id": person, "op": op, **body})
            assert status == 200, out
        status, state, _ = bob.request("GET", "/api/state")
        assert state["suggestions"] == tally(["edited", "removed"])
    rows = [r for r in history_rows(project)[before:] if r["layer"] in ("alice", "bob")]
    assert [(r["who"], r["person_id"], r["after"], r["outcome"]) for r in rows] == [
        ("alice", 1, "[12,17]", "accepted"), ("alice", 2, "[14]", "accepted"),
        ("bob", 1, "[12]", "edited"), ("bob", 2, "[11]", "removed"), ("bob", 1, "[12,79]", "edited")]
    assert json.loads(rows[0]["suggested"]) == {"model": MODEL, "prompt_hash": vlm_har.prompt_hash(PROMPT),
                                                "actions": [12, 17]}
    conn = project.connect()
    try:
        written = project.write_report(conn)
    finally:
        conn.close()
    report = next(p for p in written if p.endswith("agreement_annotators.tsv"))
    ann = pd.read_csv(report, sep="\t").set_index("annotator")
    assert ann.loc["alice", ["suggestions", "suggestions_accepted", "suggestions_edited", "suggestions_removed"]] \
        .tolist() == [2, 2, 0, 0]
    assert ann.loc["bob", ["suggestions", "suggestions_accepted", "suggestions_edited", "suggestions_removed"]] \
        .tolist() == [2, 0, 1, 1]
    assert ann.loc["bob", "suggestions_removed_share"] == 0.5 and ann.loc["alice", "suggestions_accepted_share"] == 1
    summary = json.loads(open(next(p for p in written if p.endswith("/summary.json"))).read())
    assert {k: summary[k] for k in tally([])} == tally(["accepted", "accepted", "edited", "removed"])


# the history table as schema 1 and 2 wrote it (fixed: these are the layouts of old databases)
OLD_CHANGES = """CREATE TABLE changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, who TEXT NOT NULL, layer TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ({kinds})), clip_id TEXT NOT NULL, clip_type TEXT NOT NULL,
    person_id INTEGER NOT NULL, before TEXT, after TEXT);
CREATE INDEX changes_clip ON changes (layer, clip_id, seq);
CREATE TRIGGER changes_append_only_u BEFORE UPDATE ON changes
    BEGIN SELECT RAISE(ABORT, 'the history is append-only'); END;
CREATE TRIGGER changes_append_only_d BEFORE DELETE ON changes
    BEGIN SELECT RAISE(ABORT, 'the history is append-only'); END;
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
V1_KINDS = "'actions', 'exclusion', 'note', 'resolved'"
V2_KINDS = V1_KINDS + ", 'text', 'text_note', 'text_resolved'"


@pytest.mark.parametrize("version, kinds", [("1", V1_KINDS), ("2", V2_KINDS)])
def test_an_old_database_migrates_without_losing_a_row(tmp_path, version, kinds):
    path = tmp_path / "team.sqlite"
    old = sqlite3.connect(path)
    old.executescript(OLD_CHANGES.format(kinds=kinds))
    rows = [(1, "2026-01-01T00:00:00", "alice", "alice", "actions", "c_000", "r", 1, None, "[12]"),
            (2, "2026-01-01T00:00:01", "@auto", "@final", "exclusion", "c_001", "m", 0, None, '"blurry"')]
    old.executemany("INSERT INTO changes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    old.execute("INSERT INTO meta VALUES ('schema', ?)", (version,))
    old.commit()
    old.close()
    conn = connect(path)
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == "3"
        got = [tuple(r) for r in conn.execute("SELECT * FROM changes ORDER BY seq")]
        assert got == [r + (None, None) for r in rows]
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM changes")
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            conn.execute("INSERT INTO changes (at, who, layer, kind, clip_id, clip_type, person_id, outcome) "
                         "VALUES ('t', 'a', 'a', 'actions', 'c', 'r', 1, 'ignored')")
    finally:
        conn.close()
    connect(path).close()  # opened again: nothing more to migrate
