"""The lists the team pages keep between requests, the annotator's /api/state
(team/clip_lists.py) and the two adjudication lists (team/adjudication_lists.py): each
change is seen by the next request, whoever made it (results files written as the
workflow writes them: atomically), and each list is the one a fresh server gives. Real
HTTP against the production server (waitress in a thread)."""

from __future__ import annotations

import json

from microg4m.annotate.team import accounts, assign, decisions
from microg4m.common.atomic import write_text
from microg4m.annotate.team.db import transaction
from microg4m.annotate.team.project import Project
from microg4m.annotate.team.server import create_app

from team_setup import Client, make_project, serving
from test_team_vqa import DRAFT_PAIRS, write_drafts


def entries(client: Client) -> tuple[dict, dict]:
    status, state, _ = client.request("GET", "/api/state")
    assert status == 200, state
    return {c["clip_id"]: c for c in state["clips"]}, state


def fresh(project) -> dict:
    """The state a newly started server gives (nothing kept from earlier requests)."""
    with serving(create_app(project, {"127.0.0.1"})) as port:
        return entries(Client(port).login("alice"))[1]


def test_the_clip_list_shows_every_change_at_the_next_request(tmp_path):
    project = make_project(tmp_path)  # alice and bob: every kept clip
    with serving(create_app(project, {"127.0.0.1"})) as port:
        alice = Client(port).login("alice")
        clips, state = entries(alice)
        assert (clips["dancer_000"]["persons"], clips["dancer_000"]["labelled"], state["done"]) == ([1, 2], 0, 0)
        # the annotator's own changes
        for person, done in ((1, False), (2, True)):
            assert alice.post("/api/actions", {"clip_id": "dancer_000", "person_id": person, "action": 12,
                                               "op": "add"})[0] == 200
            clips, state = entries(alice)
            assert (clips["dancer_000"]["labelled"], clips["dancer_000"]["done"], state["done"]) == (person, done,
                                                                                                   int(done))
        # a change written by another process into alice's layer
        conn = project.connect()
        with transaction(conn):
            decisions.change_exclusion(conn, "alice", project.results.clip("dancer_001"), True, "blurry")
        conn.close()
        clips, state = entries(alice)
        assert (clips["dancer_001"]["excluded"], clips["dancer_001"]["reason"], state["done"]) == (True, "blurry", 2)
        # bob's changes are not alice's
        bob = Client(port).login("bob")
        assert bob.post("/api/actions", {"clip_id": "film_000", "person_id": 1, "action": 14, "op": "add"})[0] == 200
        assert entries(alice)[0]["film_000"]["labelled"] == 0
        assert alice.post("/api/actions", {"clip_id": "film_000", "person_id": 1, "action": 14, "op": "add"})[0] == 200
        assert entries(alice)[0]["film_000"]["done"] is True
        # a re-run of the track stage (its files written atomically, as the workflow writes them):
        # film_000 has a second person now
        tracks = project.results.index.final_tracks(project.results.clip("film_000").unit)
        write_text(tracks, tracks.read_text() + "".join(f"film_000,{f},2,60.00,60.00,200.00,290.00,0.9000\n"
                                                       for f in range(1, 91)))
        clips, state = entries(alice)
        assert (clips["film_000"]["persons"], clips["film_000"]["labelled"], clips["film_000"]["done"]) == \
            ([1, 2], 1, False)
        # and of the filter: dancer_000 is rejected now, so it is not on the page
        decided = project.results.index.files(project.results.clip("dancer_000").unit).decisions
        write_text(decided, decided.read_text().replace("dancer_000\t1.0000\t\t1\tkept",
                                                        "dancer_000\t1.0000\t\t0\tfew_persons"))
        clips, state = entries(alice)
        assert "dancer_000" not in clips and (state["done"], state["total"]) == (1, len(clips))
    assert json.dumps(state, sort_keys=True) == json.dumps(fresh(project), sort_keys=True)


def test_every_annotators_list_is_made_when_the_server_starts(tmp_path, monkeypatch):
    """The server makes each active annotator's list when it starts, before it answers: an
    annotator's first state makes no entry, and gives what a fresh server gives."""
    from microg4m.annotate.team import clip_lists

    project = make_project(tmp_path)  # alice and bob
    app = create_app(project, {"127.0.0.1"})
    assert sorted(app.extensions["microg4m.team.lists"]._lists) == ["alice", "bob"]
    made = []
    real = clip_lists.clip_state
    monkeypatch.setattr(clip_lists, "clip_state", lambda *a: made.append(a[0].clip_id) or real(*a))
    with serving(app) as port:
        state = entries(Client(port).login("alice"))[1]
    assert made == [] and state["clips"]
    monkeypatch.undo()
    assert json.dumps(state, sort_keys=True) == json.dumps(fresh(project), sort_keys=True)


def test_the_adjudication_lists_are_made_when_the_server_starts(tmp_path, monkeypatch):
    """So are the two adjudication lists: the adjudicator's first request makes no part (at
    47,590 clips, making them held every other request up for seconds)."""
    from microg4m.annotate.team import adjudication_lists

    project = make_project(tmp_path)
    app = create_app(project, {"127.0.0.1"})
    made = []
    for module, name in ((adjudication_lists.report, "clip_part"), (adjudication_lists.text_agreement, "clip_part")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, real=real, **k: made.append(a) or real(*a, **k))
    with serving(app) as port:
        judy = Client(port).login("judy")
        for path in ("/api/adjudication", "/api/text-adjudication"):
            status, listed, _ = judy.request("GET", path)
            assert status == 200 and len(listed["clips"]) == listed["listed"] >= 3, listed
    assert made == []


def test_new_clips_and_a_disabled_annotators_clips_join_the_list_at_a_write_or_a_login(tmp_path):
    """GET never writes (issue 34): what a re-run or a disabled account leaves without an
    annotator is assigned at the next write or login, and the list shows it from then on."""
    project = make_project(tmp_path, annotators=("alice", "bob", "carol"))
    index = project.results.index
    with serving(create_app(project, {"127.0.0.1"})) as port:
        alice = Client(port).login("alice")
        before = set(entries(alice)[0])
        conn = project.connect()
        for name in ("bob", "carol"):  # from the command line, another process: their clips lose every annotator
            accounts.set_active(conn, name, False)
        orphans = [c for c, names in assign.assignments(conn).items() if "alice" not in names]
        assert orphans and not set(orphans) & before
        assert set(entries(alice)[0]) == before  # a state only reads: nothing assigned yet
        mine = sorted(before)[0]
        assert alice.post("/api/actions", {"clip_id": mine, "person_id": 1, "action": 12, "op": "add"})[0] == 200
        assert set(entries(alice)[0]) == before | set(orphans)  # the write gave them to alice, the one left
        # a re-run of the workflow brings a new kept clip: listed after the next login
        files = index.files(project.results.clip("film_000").unit)
        last = files.manifest.read_text().splitlines()[-1].split("\t")
        write_text(files.manifest, files.manifest.read_text() + "\t".join(["film_002", *last[1:3], "2", "6", *last[5:]])
                   + "\n")
        write_text(files.decisions, files.decisions.read_text() + "film_002\t1.0000\t\t1\tkept\n")
        assert "film_002" not in entries(alice)[0] and assign.annotators_of(conn, "film_002") == []
        again = Client(port).login("alice")
        assert "film_002" in entries(again)[0]
        clips, state = entries(alice)
        assert "film_002" in clips and assign.annotators_of(conn, "film_002") == ["alice"]
        conn.close()
    assert json.dumps(state, sort_keys=True) == json.dumps(fresh(project), sort_keys=True)


def adjudication_lists(client: Client) -> dict:
    """What the two adjudication pages list: their clips, counts and agreement figures."""
    out = {}
    for path in ("/api/adjudication", "/api/text-adjudication"):
        status, got, _ = client.request("GET", path)
        assert status == 200, got
        out[path] = {k: got[k] for k in ("clips", "counts", "figures")}
    return out


def fresh_adjudication_lists(project) -> dict:
    """The lists a newly started server gives (a new Project: nothing kept from earlier requests)."""
    with serving(create_app(Project(project.settings), {"127.0.0.1"})) as port:
        return adjudication_lists(Client(port).login("judy"))


def test_the_adjudication_lists_show_every_change_and_equal_a_fresh_servers(tmp_path):
    """The adjudication lists keep each clip's part between requests (adjudication_lists.py):
    after labels, captions, a final, a re-run of track and new caption drafts, each list is the
    one a fresh server gives."""
    project = make_project(tmp_path)  # alice and bob: every kept clip; judy adjudicates
    write_drafts(project.results.root)
    with serving(create_app(project, {"127.0.0.1"})) as port:
        alice, bob, judy = (Client(port).login(n) for n in ("alice", "bob", "judy"))
        before = adjudication_lists(judy)
        assert before["/api/adjudication"]["counts"]["pending"] == len(before["/api/adjudication"]["clips"])
        for who, second in ((alice, 12), (bob, 14)):  # dancer_000: person 2 differs; film_000: the same
            for clip, person, action in (("dancer_000", 1, 12), ("dancer_000", 2, second), ("film_000", 1, 14)):
                assert who.post("/api/actions", {"clip_id": clip, "person_id": person, "action": action,
                                                 "op": "add"})[0] == 200
        for who, caption in ((alice, "A dancer raises both arms."), (bob, "Someone stands by a wall.")):
            assert who.post("/api/vqa", {"clip_id": "dancer_000", "caption": caption, "qa_pairs": DRAFT_PAIRS,
                                         "reviewed": True, "base": None, "from_draft": True})[0] == 200
        now = adjudication_lists(judy)
        status = {c["clip_id"]: c["status"] for c in now["/api/adjudication"]["clips"]}
        assert (status["dancer_000"], status["film_000"]) == ("disagree", "agreed")
        texts = {c["clip_id"]: c["status"] for c in now["/api/text-adjudication"]["clips"]}
        assert texts["dancer_000"] == "disagree"
        assert now == fresh_adjudication_lists(project)

        assert judy.post("/api/final", {"clip_id": "dancer_000", "excluded": False,
                                        "actions": {"1": [12], "2": [14]}})[0] == 200
        # a re-run of track (written atomically): film_000 has a second person, not labelled yet
        tracks = project.results.index.final_tracks(project.results.clip("film_000").unit)
        write_text(tracks, tracks.read_text() + "".join(f"film_000,{f},2,60.00,60.00,200.00,290.00,0.9000\n"
                                                       for f in range(1, 91)))
        # new caption drafts (written atomically): the starting text of the versions changes
        drafts = project.results.index.files(project.results.clip("dancer_000").unit).vqa_drafts
        write_text(drafts, drafts.read_text().replace("black shirt", "red shirt"))
        after = adjudication_lists(judy)
        status = {c["clip_id"]: c["status"] for c in after["/api/adjudication"]["clips"]}
        assert (status["dancer_000"], status["film_000"]) == ("resolved", "pending")
        assert after["/api/text-adjudication"]["figures"] != now["/api/text-adjudication"]["figures"]
    assert after == fresh_adjudication_lists(project)
