"""The annotation page's files and API: saving, refusing, and what the workflow reads back.

Real files on disk and the real Flask app; the small results folder is written here
(manifests, filter decisions, tracks) so that no YOLO run is needed.
"""

from __future__ import annotations

import http.client
import subprocess
import sys
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from microg4m.formats import labels
from microg4m.annotate.app import create_app
from microg4m.annotate.errors import Refused
from microg4m.annotate.results import Results
from microg4m.annotate.store import Store
from microg4m.common.atomic import write_text
from microg4m.formats.manifest import write_manifest
from microg4m.formats.results_index import ResultsIndex
from microg4m.formats.unit_plan import write_plan
from microg4m.formats.decisions import read_screening

REPO = Path(__file__).resolve().parents[1]
LABEL_MAP = REPO / "annotations" / "label_map.pbtxt"
LABEL_IDS = set(labels.read_label_map(LABEL_MAP)["id"])
# clip -> persons -> (first frame, box); every box lasts to frame 90
TRACKS = {
    "dancer_000": {1: (1, (40, 40, 150, 280)), 2: (20, (180, 60, 300, 290))},
    "dancer_001": {1: (1, (60, 30, 200, 300))},
    "film_000": {1: (1, (50, 50, 250, 300))},
    "film_001": {1: (1, (20, 20, 120, 200))},
}


def copies_of(video: Path, size):
    """A ``clip_maker`` for build_results: every clip is a copy of one real clip of ``size``."""
    def copy(path: Path):
        path.write_bytes(video.read_bytes())
        return size
    return copy


# the default layout (sources_per_job: auto): one unit of several sources, and its plan
UNITS = {"batch00000": ["dancer", "film"]}
PER_SOURCE = {"dancer": ["dancer"], "film": ["film"]}  # sources_per_job: 1


def build_results(root: Path, clip_maker=None, size=(320, 306), units=UNITS, plan: bool = True) -> Path:
    """A results folder: source ``dancer`` (real) and ``film`` (movie), in ``units`` (by
    default both in unit batch00000, as ``sources_per_job: auto`` makes them), with the
    unit plan ``units.tsv`` unless ``plan`` is False (a folder of an older run).

    Kept: dancer_000 (persons 1, 2), dancer_001, film_000; dancer_002 rejected
    (few_persons); film_001 rejected as screened. ``clip_maker(path)`` writes the mp4s
    of the clips on the page (returns its frame size) when given.
    """
    clips_of = {"dancer": ("r", ["dancer_000", "dancer_001", "dancer_002"]), "film": ("m", ["film_000", "film_001"])}
    decisions = {"dancer_002": ("0", "few_persons"), "film_001": ("0", "screened")}
    for unit, sources in units.items():
        folder = root / "clips" / unit
        folder.mkdir(parents=True)
        w, h = size
        manifest, decided, rows = [], [], ["video_id,frame_id,person_id,xmin,ymin,xmax,ymax,conf"]
        for src in sources:
            ctype, clips = clips_of[src]
            for i, clip in enumerate(clips):
                if clip_maker and clip in TRACKS:
                    w, h = clip_maker(folder / f"{clip}.mp4")
                manifest.append(dict(clip_id=clip, source_id=src, clip_type=ctype, seq=i, start_s=3 * i, frames=90,
                                     width=w, height=h, status="ok", reason=""))
                keep, reason = decisions.get(clip, ("1", "kept"))
                decided.append(f"{clip}\t1.0000\t\t{keep}\t{reason}\n")
                if keep == "1":  # the track stage only tracks kept clips
                    for pid, (first, box) in TRACKS.get(clip, {}).items():
                        rows += [f"{clip},{f},{pid},{','.join(f'{v:.2f}' for v in box)},0.9000" for f in range(first, 91)]
        write_manifest(folder / "manifest.tsv", manifest)
        (root / "filter").mkdir(exist_ok=True)
        (root / "filter" / f"{unit}.tsv").write_text("clip_id\tperson_share\tcuts\tkeep\treason\n" + "".join(decided))
        (root / "tracks").mkdir(exist_ok=True)
        (root / "tracks" / f"{unit}.csv").write_text("\n".join(rows) + "\n")
    if plan:
        write_plan(root / "units.tsv", units)
    return root


def unit_inputs(res: Path) -> dict:
    """The per-unit inputs of export.run of a results folder, found through the results index."""
    index = ResultsIndex(res)
    files = [index.files(u) for u in index.units()]
    return dict(manifests=[f.manifest for f in files], decisions=[f.decisions for f in files],
                tracks=[f.final_tracks for f in files])


@pytest.fixture
def work(tmp_path):
    res = build_results(tmp_path / "results")
    ann = tmp_path / "annotations"
    return res, ann / "actions.csv", ann / "screening_excluded.txt"


@pytest.fixture
def store(work):
    res, actions, screening = work
    return Store(Results(res), actions, screening, LABEL_IDS)


def snapshot(*paths: Path) -> list:
    return [p.read_bytes() if p.exists() else None for p in paths]


# ---------------------------------------------------------------- actions file


def test_add_writes_released_schema_and_survives_a_new_store(store, work):
    res, actions, screening = work
    assert store.add("dancer_000", 1, 12) == [12]
    assert store.add("film_000", 1, 79) == [79]
    assert store.add("dancer_000", 2, 14) == [14]
    assert store.add("dancer_000", 1, 17) == [12, 17]  # goes after person 1's row
    assert actions.read_text() == ("video_id,movie_or_real,person_id,action\n"
                                   "dancer_000,r,1,12\ndancer_000,r,1,17\ndancer_000,r,2,14\nfilm_000,m,1,79\n")
    df = labels.read_actions(actions)  # the reader the export uses
    assert df["movie_or_real"].tolist() == ["r", "r", "r", "m"]
    again = Store(Results(res), actions, screening, LABEL_IDS)  # state lives on disk
    assert again.actions() == {("dancer_000", 1): [12, 17], ("dancer_000", 2): [14], ("film_000", 1): [79]}
    assert list(actions.parent.glob(".*")) == []  # no temporary file left behind


def test_replace_many_places_rows_as_the_page_saves_a_set_in_one_write(store, work):
    """An import's many sets in one write: a person's rows where its first was, a new person
    after its clip's rows, a new clip's at the end; unchanged sets and excluded clips left."""
    res, actions, screening = work
    store.add("dancer_000", 1, 12)
    store.add("dancer_001", 1, 11)
    store.add("film_000", 1, 79)
    store.set_excluded("film_000", True, "blurry")
    types = {"dancer_000": "r", "dancer_001": "r", "film_000": "m"}
    got = store.replace_many({("dancer_000", 1): [14, 17], ("dancer_000", 2): [12], ("dancer_001", 1): [11],
                              ("film_000", 1): [80]}, types)
    assert got == {"changed": 2, "unchanged": 1, "excluded": [("film_000", 1)]}
    assert actions.read_text() == ("video_id,movie_or_real,person_id,action\ndancer_000,r,1,14\n"
                                   "dancer_000,r,1,17\ndancer_000,r,2,12\ndancer_001,r,1,11\nfilm_000,m,1,79\n")
    store.set_excluded("film_000", False)
    store.remove("film_000", 1, 79)
    assert store.replace_many({("film_000", 1): [80]}, types)["changed"] == 1
    assert actions.read_text().endswith("dancer_001,r,1,11\nfilm_000,m,1,80\n")
    before = actions.read_bytes()
    assert store.replace_many({("dancer_000", 2): [12]}, types) == {"changed": 0, "unchanged": 1, "excluded": []}
    assert actions.read_bytes() == before


def test_add_twice_is_a_no_op_and_remove_takes_every_copy(store, work):
    _, actions, _ = work
    actions.parent.mkdir(parents=True)
    # a hand-made file: another run's clip and a repeated row are kept as written
    actions.write_text("video_id,movie_or_real,person_id,action\nother_001,m,3,80\n"
                       "dancer_000,r,1,12\ndancer_000,r,1,12\n")
    before = actions.read_bytes()
    assert store.add("dancer_000", 1, 12) == [12]
    assert actions.read_bytes() == before
    assert store.remove("dancer_000", 1, 12) == []
    assert actions.read_text() == "video_id,movie_or_real,person_id,action\nother_001,m,3,80\n"
    assert store.remove("dancer_000", 1, 12) == []  # nothing left to remove: no error


def test_sixth_action_is_refused_and_nothing_written(store, work):
    _, actions, _ = work
    for aid in (11, 12, 14, 17, 79):
        store.add("dancer_000", 1, aid)
    before = snapshot(actions)
    with pytest.raises(Refused, match="already has 5 actions") as exc:
        store.add("dancer_000", 1, 43)
    assert exc.value.status == 409
    assert snapshot(actions) == before
    assert store.add("dancer_000", 1, 79) == [11, 12, 14, 17, 79]  # one it already has: fine


@pytest.mark.parametrize("clip, person, action, status, message", [
    ("dancer_000", 1, 2, 422, "unknown action id 2"),
    ("dancer_000", 1, "12", 400, "action must be an integer"),
    ("dancer_000", 1, True, 400, "action must be an integer"),
    ("dancer_000", 3, 12, 404, "person 3 has no box in clip dancer_000"),
    ("dancer_000", "1", 12, 400, "person_id must be an integer"),
    ("nope_000", 1, 12, 404, "unknown clip 'nope_000'"),
    ("dancer_002", 1, 12, 404, "unknown clip 'dancer_002'"),  # rejected by the filter
    ("../../etc/passwd", 1, 12, 404, "unknown clip"),
    (None, 1, 12, 404, "unknown clip None"),
])
def test_bad_labels_are_refused_and_nothing_written(store, work, clip, person, action, status, message):
    _, actions, screening = work
    with pytest.raises(Refused, match=message) as exc:
        store.add(clip, person, action)
    assert exc.value.status == status
    assert snapshot(actions, screening) == [None, None]


def test_a_broken_actions_file_stops_the_page_at_start(work):
    res, actions, screening = work
    actions.parent.mkdir(parents=True)
    actions.write_text("video_id,movie_or_real,person_id,action\ndancer_000,r,one,12\n")
    before = actions.read_bytes()
    with pytest.raises(ValueError, match=r"actions.csv:2: bad row .*fix it by hand"):
        Store(Results(res), actions, screening, LABEL_IDS)
    actions.write_text("clip,person\n")
    with pytest.raises(ValueError, match="header clip,person, expected video_id"):
        Store(Results(res), actions, screening, LABEL_IDS)
    actions.write_bytes(before)
    assert actions.read_bytes() == before


def test_concurrent_writers_lose_nothing(work):
    """Two stores (as two annotate processes or tabs) adding at once: every row lands."""
    res, actions, screening = work
    stores = [Store(Results(res), actions, screening, LABEL_IDS) for _ in range(2)]
    jobs = [(stores[0], "dancer_000", 1, a) for a in (11, 12, 14, 17, 79)]
    jobs += [(stores[1], "dancer_001", 1, a) for a in (11, 12, 14, 17, 79)]
    threads = [threading.Thread(target=s.add, args=(c, p, a)) for s, c, p, a in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = stores[0].actions()
    assert sorted(got[("dancer_000", 1)]) == sorted(got[("dancer_001", 1)]) == [11, 12, 14, 17, 79]


# ---------------------------------------------------------------- screening file


def test_exclusions_keep_comments_and_the_filter_reads_them(store, work):
    _, actions, screening = work
    screening.parent.mkdir(parents=True)
    screening.write_text("# screened by hand\nold_007\n\n")
    store.set_excluded("dancer_001", True, "camera  shake\n(blurry)")
    store.set_excluded("film_000", True, "")
    assert screening.read_text() == "# screened by hand\nold_007\n\ndancer_001  # camera shake (blurry)\nfilm_000\n"
    assert read_screening(screening) == {"old_007", "dancer_001", "film_000"}
    store.set_excluded("dancer_001", True, "out of focus #2")  # new reason, same place
    assert screening.read_text().splitlines()[3] == "dancer_001  # out of focus #2"
    assert store.excluded() == {"old_007": "", "dancer_001": "out of focus #2", "film_000": ""}
    store.set_excluded("dancer_001", False)
    assert screening.read_text() == "# screened by hand\nold_007\n\nfilm_000\n"
    assert read_screening(screening) == {"old_007", "film_000"}
    assert not actions.exists()


def test_excluded_clip_refuses_labels_and_screened_clip_can_come_back(store, work):
    _, actions, screening = work
    store.set_excluded("dancer_000", True, "no action")
    with pytest.raises(Refused, match="dancer_000 is excluded") as exc:
        store.add("dancer_000", 1, 12)
    assert exc.value.status == 409 and not actions.exists()
    # film_001 was rejected as screened by the filter: on the page, so it can be included again
    film = store.results.clip("film_001")
    assert not film.kept and store.results.persons("film_001") == []
    store.set_excluded("film_001", True, "dark")
    store.set_excluded("film_001", False)
    assert read_screening(screening) == {"dancer_000"}


@pytest.mark.parametrize("clip, excluded, reason, status, message", [
    ("dancer_000", "yes", "", 400, "excluded must be true or false"),
    ("dancer_000", True, 3, 400, "reason must be a string"),
    ("dancer_000", True, "x" * 201, 422, "reason is 201 characters long"),
    ("dancer_002", True, "", 404, "unknown clip"),
    ("..", True, "", 404, "unknown clip"),
])
def test_bad_exclusions_are_refused_and_nothing_written(store, work, clip, excluded, reason, status, message):
    _, actions, screening = work
    with pytest.raises(Refused, match=message) as exc:
        store.set_excluded(clip, excluded, reason)
    assert exc.value.status == status
    assert snapshot(actions, screening) == [None, None]


# ---------------------------------------------------------------- HTTP API


@pytest.fixture(scope="module")
def clip_video(tmp_path_factory):
    """One real H.264 clip (90 frames, dancer footage, 320 px wide) and its frame size."""
    from conftest import get_footage, make_clip

    out = make_clip(get_footage("dancer"), tmp_path_factory.mktemp("clip") / "c.mp4",
                    extra=("-vf", "scale=320:-2"))
    cap = cv2.VideoCapture(str(out))
    size = (int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    cap.release()
    return out, size


def make_app(tmp_path, clip_video, annotator: str = ""):
    """The real app over a small results folder whose clips are copies of one real clip
    (its access token in ``app.config["ACCESS_TOKEN"]``)."""
    video, size = clip_video
    res = build_results(tmp_path / "results", clip_maker=copies_of(video, size), size=size)
    ann = tmp_path / "annotations"
    app = create_app(str(res), str(ann / "actions.csv"), str(ann / "screening_excluded.txt"), str(LABEL_MAP), annotator)
    return app, res, ann


def bearer(app) -> dict:
    """The header that carries the single-user page's access token."""
    return {"Authorization": f"Bearer {app.config['ACCESS_TOKEN']}"}


def token_client(app):
    """Flask's test client, sending the access token with every request."""
    c = app.test_client()
    c.environ_base["HTTP_AUTHORIZATION"] = bearer(app)["Authorization"]
    return c


@pytest.fixture
def client(tmp_path, clip_video):
    app, _, ann = make_app(tmp_path, clip_video, "ann1")
    return token_client(app), ann


def post(client, url, body):
    return client.post(url, json=body)


def test_api_state_clip_and_changes(client):
    c, ann = client
    st = c.get("/api/state").get_json()
    assert [x["clip_id"] for x in st["clips"]] == ["dancer_000", "dancer_001", "film_000", "film_001"]
    assert (st["done"], st["total"], st["annotator"], len(st["labels"])) == (0, 4, "ann1", 50)
    assert st["colors"][0] == "rgb(255,200,0)"  # preview.PALETTE[0] is BGR (0, 200, 255)
    clip = c.get("/api/clips/dancer_000").get_json()
    assert clip["persons"] == [1, 2] and clip["boxes"]["1"] == [[1, 40, 40, 150, 280]]
    assert clip["boxes"]["20"] == [[1, 40, 40, 150, 280], [2, 180, 60, 300, 290]]
    r = post(c, "/api/actions", {"clip_id": "dancer_000", "person_id": 1, "action": 12, "op": "add"})
    assert r.status_code == 200 and r.get_json()["actions"] == [12]
    post(c, "/api/actions", {"clip_id": "dancer_000", "person_id": 2, "action": 14, "op": "add"})
    post(c, "/api/screening", {"clip_id": "dancer_001", "excluded": True, "reason": "blurry"})
    st = c.get("/api/state").get_json()
    assert st["done"] == 2  # dancer_000 (both persons labelled) and dancer_001 (excluded)
    assert c.get("/api/clips/dancer_000").get_json()["actions"] == {"1": [12], "2": [14]}
    assert (ann / "actions.csv").read_text().splitlines()[1:] == ["dancer_000,r,1,12", "dancer_000,r,2,14"]
    assert (ann / "screening_excluded.txt").read_text().splitlines()[-1] == "dancer_001  # blurry"


def test_a_changed_track_file_decision_or_label_file_is_seen_by_the_next_state(tmp_path, clip_video):
    """The page keeps its clip list between requests (made again when the index's token or a
    label file changed): a re-run of track or filter (files written atomically, as the
    workflow writes them) and a label file written by another process show at the next
    /api/state, which is then the one a fresh page gives."""
    app, res, ann = make_app(tmp_path, clip_video)
    c = token_client(app)

    def clips(client=c) -> dict:
        return {x["clip_id"]: x for x in client.get("/api/state").get_json()["clips"]}

    assert clips()["film_000"]["persons"] == [1]
    index = ResultsIndex(res)
    tracks = index.final_tracks(index.clip("film_000").unit)
    write_text(tracks, tracks.read_text() + "".join(f"film_000,{f},2,60.00,60.00,200.00,290.00,0.9000\n"
                                                   for f in range(1, 91)))
    assert clips()["film_000"]["persons"] == [1, 2]
    decisions = index.files(index.clip("dancer_001").unit).decisions
    write_text(decisions, decisions.read_text().replace("dancer_001\t1.0000\t\t1\tkept",
                                                        "dancer_001\t0.3000\t\t0\tfew_persons"))
    assert "dancer_001" not in clips()
    write_text(ann / "actions.csv", "video_id,movie_or_real,person_id,action\nfilm_000,m,1,12\n")  # another process
    assert clips()["film_000"]["labelled"] == 1
    fresh = token_client(create_app(str(res), str(ann / "actions.csv"), str(ann / "screening_excluded.txt"),
                                    str(LABEL_MAP)))
    assert clips() == clips(fresh)


def test_frames_are_the_clips_frames(client, clip_video, tmp_path):
    c, _ = client
    r = c.get("/clip/dancer_000/frame/45.jpg")
    assert r.status_code == 200 and r.mimetype == "image/jpeg"
    got = cv2.imdecode(np.frombuffer(r.data, np.uint8), cv2.IMREAD_COLOR)
    cap = cv2.VideoCapture(str(clip_video[0]))
    cap.set(cv2.CAP_PROP_POS_FRAMES, 44)
    want = cap.read()[1]
    cap.release()
    assert got.shape == want.shape and np.abs(got.astype(int) - want).mean() < 4  # JPEG loss only
    other = cv2.imdecode(np.frombuffer(c.get("/clip/dancer_000/frame/1.jpg").data, np.uint8), cv2.IMREAD_COLOR)
    assert np.abs(other.astype(int) - want).mean() > np.abs(got.astype(int) - want).mean()
    assert c.get("/clip/dancer_000.mp4").data == clip_video[0].read_bytes()
    ResultsIndex(tmp_path / "results").clip("dancer_001").path.unlink()
    r = c.get("/clip/dancer_001/frame/1.jpg")
    assert r.status_code == 404 and r.get_json()["error"] == "clip file dancer_001.mp4 not found"


@pytest.mark.parametrize("method, url, body, status, message", [
    ("post", "/api/actions", {"clip_id": "dancer_000", "person_id": 1, "action": 2, "op": "add"}, 422,
     "unknown action id 2"),
    ("post", "/api/actions", {"clip_id": "nope_000", "person_id": 1, "action": 12, "op": "add"}, 404, "unknown clip"),
    ("post", "/api/actions", {"clip_id": "dancer_000", "person_id": 9, "action": 12, "op": "add"}, 404,
     "person 9 has no box"),
    ("post", "/api/actions", {"clip_id": "dancer_000", "person_id": 1, "action": 12, "op": "toggle"}, 400,
     "op must be"),
    ("post", "/api/actions", ["dancer_000", 1, 12], 400, "expected a JSON object"),
    ("post", "/api/screening", {"clip_id": "dancer_000", "excluded": 1}, 400, "excluded must be true or false"),
    ("post", "/api/screening", {"clip_id": "../results", "excluded": True}, 404, "unknown clip"),
    ("get", "/api/clips/nope_000", None, 404, "unknown clip 'nope_000'"),
    ("get", "/api/clips/..%2F..%2Fetc%2Fpasswd", None, 404, "no such page"),
    ("get", "/clip/..%2F..%2Fetc%2Fpasswd.mp4", None, 404, "no such page"),
    ("get", "/clip/dancer_002.mp4", None, 404, "unknown clip 'dancer_002'"),
    ("get", "/clip/dancer_000/frame/91.jpg", None, 404, "frame 91 out of range"),
    ("get", "/clip/dancer_000/frame/0.jpg", None, 404, "frame 0 out of range"),
    ("get", "/clip/dancer_000/frame/x.jpg", None, 404, "no such page"),
])
def test_api_refusals_are_json_4xx_and_write_nothing(client, method, url, body, status, message):
    c, ann = client
    r = c.post(url, json=body) if method == "post" else c.get(url)
    assert r.status_code == status, r.data
    assert message in r.get_json()["error"]
    assert list(ann.glob("*")) == []


def test_a_form_post_is_refused(client):
    """A plain HTML form (another web site) cannot write: the body must be JSON."""
    c, ann = client
    r = c.post("/api/actions", data={"clip_id": "dancer_000", "person_id": "1", "action": "12", "op": "add"})
    assert r.status_code == 400 and "JSON" in r.get_json()["error"]
    assert list(ann.glob("*")) == []


def test_a_raw_path_outside_the_results_is_refused(client, tmp_path):
    """``GET /clip/../../etc/passwd`` sent as is (no client-side normalising) to the real server."""
    from werkzeug.serving import make_server

    c, ann = client
    server = make_server("127.0.0.1", 0, c.application, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for path in ("/clip/../../etc/passwd", "/clip/../../../../etc/passwd.mp4", "/static/../../../etc/passwd",
                     "/clip/dancer_000/frame/../../../../etc/passwd"):
            conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
            conn.request("GET", path, headers=bearer(c.application))
            resp = conn.getresponse()
            body = resp.read()
            assert 400 <= resp.status < 500, (path, resp.status)
            assert b"root:" not in body and b"error" in body
            conn.close()
    finally:
        server.shutdown()
        thread.join()


# ---------------------------------------------------------------- command line


def test_cli_refuses_bad_options_before_serving(tmp_path):
    """Both entry points (``microg4m annotate``, ``python -m microg4m.annotate``) fail cleanly."""
    res = build_results(tmp_path / "results")
    (tmp_path / "empty").mkdir()
    lm = ["--label-map", str(LABEL_MAP), "--port", "0"]
    cases = [
        (["microg4m.cli", "annotate", "--results", str(res), "--annotator", "a b", *lm], "--annotator 'a b'"),
        (["microg4m.annotate", "--results", str(tmp_path / "empty"), *lm], "no clips/*/manifest.tsv"),
    ]
    for args, message in cases:  # a timeout, not a hang, if one of them starts serving
        proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)
        assert proc.returncode == 1 and "microg4m annotate: error: " in proc.stderr, (args, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
    ann = tmp_path / "annotations"
    with pytest.raises(ValueError, match=f"results folder {tmp_path / 'none'} not found"):
        create_app(str(tmp_path / "none"), str(ann / "a.csv"), str(ann / "s.txt"), str(LABEL_MAP))
    with pytest.raises(ValueError, match="cannot read label map"):
        create_app(str(res), str(ann / "a.csv"), str(ann / "s.txt"), str(tmp_path / "no.pbtxt"))
    assert not ann.exists()


def test_annotator_selects_its_own_actions_file():
    from argparse import Namespace

    from microg4m.annotate.options import actions_path

    assert actions_path(Namespace(annotator="", actions=None)) == "annotations/actions.csv"
    assert actions_path(Namespace(annotator="alice", actions=None)) == "annotations/actions.alice.csv"
    assert actions_path(Namespace(annotator="alice", actions="x.csv")) == "x.csv"
    with pytest.raises(ValueError, match="--annotator '../x'"):
        actions_path(Namespace(annotator="../x", actions=None))
