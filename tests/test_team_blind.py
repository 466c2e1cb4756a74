"""Blind double annotation: an annotator's answers carry nothing about the co-annotator.

Two clips with one person each (dancer_001, film_000), both assigned to alice and bob. On
one, bob chose action 14 and wrote a reviewed caption; on the other he did nothing. Alice
then makes the same changes on both clips (the issue's probe: add and remove each action
in turn; exclude and include; save a reviewed caption equal to bob's): every answer she
gets is the same on both clips, although on the first her changes make the final labels
and the final text appear and go (the adjudicator, who sees everything, sees them).
Real HTTP against the production server.
"""

from __future__ import annotations

import pytest

from microg4m.annotate.team.server import create_app

from team_setup import Client, make_project, serving

PROBED, QUIET = "dancer_001", "film_000"  # bob labelled the first, not the second
CAPTION = "A person stands in front of a blue wall."
PAIRS = [{"Q": "Where does the person stand?", "A": "In front of a blue wall."}]


@pytest.fixture
def team(tmp_path):
    project = make_project(tmp_path, annotators=("alice", "bob"), k=2)
    with serving(create_app(project, {"127.0.0.1", "localhost"})) as port:
        yield project, Client(port).login("alice"), Client(port).login("bob"), Client(port).login("judy")


def probe(alice: Client, clip: str) -> list:
    """Alice's changes on ``clip``; her answers, with the clip's name and her own times taken out
    and her change numbers counted from the first on this clip."""
    answers = []
    for action in (12, 14, 17):
        for op in ("add", "remove"):
            answers.append(alice.post("/api/actions", {"clip_id": clip, "person_id": 1, "action": action, "op": op}))
    answers.append(alice.post("/api/actions", {"clip_id": clip, "person_id": 1, "action": 14, "op": "add"}))
    for excluded in (True, False):
        answers.append(alice.post("/api/screening", {"clip_id": clip, "excluded": excluded, "reason": "dark"}))
    answers.append(alice.post("/api/vqa", {"clip_id": clip, "caption": CAPTION, "qa_pairs": PAIRS,
                                           "reviewed": True, "base": None}))
    out, first = [], None
    for status, body, _ in answers:
        assert status == 200, body
        body = dict(body, clip_id="<clip>")
        if isinstance(body.get("entry"), dict):
            body["entry"] = {k: v for k, v in body["entry"].items() if k != "updated"}
        if isinstance(body.get("change"), int):
            first = body["change"] if first is None else first
            body["change"] -= first
        if body.get("seq"):  # (what the server answered before: history seqs, counted the same way)
            first = body["seq"][0] if first is None else first
            body["seq"] = [s - first for s in body["seq"]]
        out.append((status, body))
    return out


def test_an_annotators_answers_are_the_same_whatever_the_co_annotator_chose(team):
    project, alice, bob, judy = team
    assert bob.post("/api/actions", {"clip_id": PROBED, "person_id": 1, "action": 14, "op": "add"})[0] == 200
    assert bob.post("/api/vqa", {"clip_id": PROBED, "caption": CAPTION, "qa_pairs": PAIRS, "reviewed": True,
                                 "base": None})[0] == 200
    probed, quiet = probe(alice, PROBED), probe(alice, QUIET)
    assert probed == quiet
    assert all("seq" not in body and "status" not in body for _, body in probed)
    # it was not for want of agreement: the final labels came and went on the probed clip only
    rows = judy.request("GET", f"/api/history/{PROBED}")[1]["rows"]
    finals = [r for r in rows if r["layer"] == "@final" and r["kind"] == "actions"]
    assert len(finals) >= 3 and {r["who"] for r in finals} == {"@auto"}
    assert not [r for r in judy.request("GET", f"/api/history/{QUIET}")[1]["rows"] if r["layer"] == "@final"]
    listing = {c["clip_id"]: c["status"] for c in judy.request("GET", "/api/adjudication")[1]["clips"]}
    texts = {c["clip_id"]: c["status"] for c in judy.request("GET", "/api/text-adjudication")[1]["clips"]}
    assert (listing[PROBED], texts[PROBED]) == ("agreed", "agreed")  # alice's last labels and text match bob's
    assert (listing[QUIET], texts[QUIET]) == ("pending", "pending")
