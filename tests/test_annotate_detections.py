"""An action model's detections (an AVA detections CSV, as ``microg4m evaluate har`` reads it)
as suggestions on the labelling page: matched to the tracked persons by IoU at their frame,
the actions above the score threshold pre-ticked, the page's outcome log recording what the
annotators made of them; rows of unknown clips and boxes of no person are named, the rest goes on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from microg4m.annotate.app import create_app
from microg4m.annotate.detection_suggestions import match
from microg4m.common.boxes import iou_matrix
from microg4m.annotate.team.server import create_app as create_team_app

from team_setup import Client, make_project, serving
from test_annotate_store import LABEL_MAP, TRACKS, build_results, clip_video, copies_of, token_client  # noqa: F401

STAMP = 45


def norm(box, size):
    w, h = size
    return [round(box[0] / w, 3), round(box[1] / h, 3), round(box[2] / w, 3), round(box[3] / h, 3)]


@pytest.fixture(scope="module")
def detected(tmp_path_factory, clip_video):  # noqa: F811
    """A results folder (real clips) and a detections CSV of a model: dancer_000's two persons
    (person 1: stand 0.9, sit 0.7, carry/hold 0.8, talk to 0.3; person 2: walk 0.6), a box
    where nobody is, and a clip the run does not have."""
    video, size = clip_video
    tmp = tmp_path_factory.mktemp("detections")
    res = build_results(tmp / "results", clip_maker=copies_of(video, size), size=size)
    w, h = size
    p1 = norm(np.add(TRACKS["dancer_000"][1][1], (3, -2, 4, 1)), size)  # a little off the track's box
    p2 = norm(TRACKS["dancer_000"][2][1], size)
    rows = [("dancer_000", STAMP, *p1, a, s) for a, s in ((12, 0.9), (11, 0.7), (17, 0.8), (79, 0.3))]
    rows += [("dancer_000", STAMP, *p2, 14, 0.6), ("dancer_000", STAMP, 0.9, 0.9, 1.0, 1.0, 12, 0.99),
             ("nosuch_000", STAMP, 0.1, 0.1, 0.5, 0.5, 12, 0.9)]
    path = tmp / "slowfast_detections.csv"
    path.write_text("".join(f"{v},{s:04d},{x1},{y1},{x2},{y2},{a},{sc}\n" for v, s, x1, y1, x2, y2, a, sc in rows))
    return res, path


def test_match_is_one_to_one_by_the_highest_iou():
    det = np.array([[0, 0, 10, 10], [0, 0, 9, 10], [50, 50, 60, 60]], float)
    persons = np.array([[0, 0, 10, 10], [100, 100, 110, 110]], float)
    assert iou_matrix(det[:1], persons).tolist() == [[1.0, 0.0]]
    assert match(det, persons, 0.5) == [(0, 0, 1.0)]  # the second box wanted person 1 too; the third matches none


def test_detections_are_suggested_and_their_outcome_logged(tmp_path, detected):
    res, path = detected
    ann = tmp_path / "annotations"
    app = create_app(str(res), str(ann / "actions.csv"), str(ann / "screening_excluded.txt"), str(LABEL_MAP),
                     "ann1", detections={"detections": str(path), "score": 0.5, "iou_min": 0.5})
    client = token_client(app)
    clip = client.get("/api/clips/dancer_000").get_json()
    assert {p: s["actions"] for p, s in clip["suggestions"].items()} == {"1": [12, 17], "2": [14]}
    assert {s["model"] for s in clip["suggestions"].values()} == {path.name}
    assert clip["actions"] == {"1": [], "2": []}
    problems = client.get("/api/state").get_json()["problems"]
    assert any("nosuch_000" in p and "no kept clip" in p for p in problems)
    assert any("1 detected box(es) match no tracked person" in p for p in problems)
    r = client.post("/api/actions", json={"clip_id": "dancer_000", "person_id": 1, "op": "set", "actions": [12]})
    assert r.get_json()["outcome"] == "edited"
    log = pd.read_csv(ann / "actions.suggestions.tsv", sep="\t", dtype=str)
    assert log[["clip_id", "person_id", "model", "suggested", "saved", "outcome"]].values.tolist() == [
        ["dancer_000", "1", path.name, "12 17", "12", "edited"]]
    # a higher threshold: only stand remains for person 1, nothing for person 2
    app = create_app(str(res), str(ann / "b.csv"), str(ann / "screening_excluded.txt"), str(LABEL_MAP),
                     detections={"detections": str(path), "score": 0.85, "iou_min": 0.5})
    got = token_client(app).get("/api/clips/dancer_000").get_json()["suggestions"]
    assert {p: s["actions"] for p, s in got.items()} == {"1": [12]}


def test_team_mode_takes_the_detections_from_the_config(tmp_path, detected):
    res, path = detected
    project = make_project(tmp_path, results=res, detections={"detections": str(path), "score": 0.5, "iou_min": 0.5})
    with serving(create_team_app(project, {"127.0.0.1"})) as port:
        status, clip, _ = Client(port).login("alice").request("GET", "/api/clips/dancer_000")
    assert status == 200 and {p: s["actions"] for p, s in clip["suggestions"].items()} == {"1": [12, 17], "2": [14]}

