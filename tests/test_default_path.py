"""The default path, end to end, as a user runs it.

One real run of the demo (``.test/demo``: the README's demo sources, config and labels at
detect.imgsz 320; tests/demo_run.py, which makes it once for this module and
tests/test_release.py) under the default ``sources_per_job: auto``, which on the tests' 2
CPUs makes 2 units of 4 sources; then every human step on its results folder, each checked
through the files the workflow reads back: the annotation page (``microg4m annotate`` in
headless Chromium: boxes drawn, a label that reaches ``export/`` after the re-run), team
mode, the caption review, the CVAT round trip and the command line. The tests re-run the
workflow after the step they test, so the order of this module is the order of a session.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pandas as pd
import pytest
import yaml

from browser import CHROMIUM, canvas_shot, chromium_page, left_edge, near, person_bgr, wait_drawn
from microg4m.annotate.app import create_app
from microg4m.annotate.team.server import create_app as create_team_app
from microg4m.common import media
from microg4m.formats import labels
from microg4m.formats.manifest import read_manifest
from microg4m.formats.records import read_records
from microg4m.formats.results_index import ResultsIndex
from microg4m.formats.tracks import read_tracks
from team_setup import Client, make_project, serving
from test_annotate_store import token_client
from vlm_stub import CAPTION, StubVLM
from demo_run import RESULTS, demo_copy, run
from workflow import jobs_ran

pytestmark = pytest.mark.slow
MODEL = "stub/vlm"


def cli(wd, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "microg4m.cli", *args], cwd=wd, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """This module's copy of the session's demo run (tests/demo_run.py)."""
    return demo_copy(tmp_path_factory, tmp_path_factory.mktemp("default_path") / "wd")


def ledger(wd) -> pd.DataFrame:
    return pd.read_csv(wd / RESULTS / "ledger.tsv", sep="\t", dtype=str, keep_default_na=False)


def kept_clips(wd) -> list[str]:
    rows = ledger(wd)
    return sorted(rows[(rows.level == "clip") & (rows.status == "kept")].clip_id)


def track_file_rows(wd) -> dict[str, pd.DataFrame]:
    """Every clip's final boxes, read from the track files themselves (``corrected/*.csv``)."""
    t = pd.concat([read_tracks(p) for p in sorted((wd / RESULTS / "corrected").glob("*.csv"))])
    return {clip: rows for clip, rows in t.groupby("video_id")}


def page_boxes(rows: pd.DataFrame) -> dict[str, list]:
    """The boxes of a clip's track rows as ``GET /api/clips/<clip>`` gives them."""
    out: dict[str, list] = {}
    for r in rows.sort_values(["frame_id", "person_id"]).itertuples(index=False):
        out.setdefault(str(r.frame_id), []).append([r.person_id, *(round(float(v), 2) for v in
                                                                   (r.xmin, r.ymin, r.xmax, r.ymax))])
    return out


def page_app(wd, tmp_path, **kw):
    """The single-user page over the run (its own label files, so that nothing reaches the
    run), a test client that sends the page's access token."""
    ann = tmp_path / "annotations"
    return token_client(create_app(str(wd / RESULTS), str(ann / "actions.csv"), str(ann / "screening.txt"),
                                   str(wd / "annotations" / "label_map.pbtxt"), **kw))


def test_the_demo_runs_in_units_of_several_sources_and_accounts_for_every_source(demo):
    res = demo / RESULTS
    units = ResultsIndex(res).units()
    table = pd.read_csv(demo / "config" / "sources.tsv", sep="\t").source_id.tolist()
    assert [s for sources in units.values() for s in sources] == table
    assert len(units) == 2 and all(len(sources) == 4 for sources in units.values())  # auto, 2 CPUs
    sources = ledger(demo).query("level == 'source'").set_index("source_id")
    assert set(sources.index) == set(table) and sources.at["missing", "status"] == "failed"
    assert (res / "export" / "ava_format.csv").stat().st_size > 0
    assert sorted(p.stem for p in (res / "previews").glob("*.png")) == sorted(units)


def test_every_source_has_a_status_record(demo):
    records = {r["source_id"]: r for p in (demo / RESULTS / "download").glob("*.tsv") for r in read_records(p)}
    assert set(records) == {"dancer", "pianist", "zidane", "scenecut", "noperson", "short", "carphone", "missing"}
    assert records["missing"]["status"] == "failed"
    assert "Connection refused" in records["missing"]["reason"]
    assert all(r["status"] == "ok" for k, r in records.items() if k != "missing")


def test_downloadable_sources_have_exact_clips(demo):
    index = ResultsIndex(demo / RESULTS)
    expected = {"dancer": 3, "pianist": 2, "zidane": 2, "scenecut": 2, "noperson": 1, "short": 0, "carphone": 1,
                "missing": 0}
    clips = pd.concat([read_manifest(index.files(u).manifest) for u in index.units()])
    for src, n in expected.items():
        ok = clips[(clips.source_id == src) & (clips.status == "ok")]
        assert len(ok) == n, src
        for clip in ok.clip_id:
            assert media.count_frames(index.clip_files(clip).mp4) == 90
    status = {r["source_id"]: r for u in index.units() for r in read_records(index.files(u).status)}
    assert set(status) == set(expected)
    assert status["missing"]["status"] == "skipped" and "download failed" in status["missing"]["reason"]


def test_the_page_lists_every_kept_clip_with_the_persons_and_boxes_of_its_track_file(demo, tmp_path):
    page = page_app(demo, tmp_path)
    state = page.get("/api/state").get_json()
    assert [c["clip_id"] for c in state["clips"]] == kept_clips(demo)
    assert state["problems"] == []
    tracks = track_file_rows(demo)
    persons = ledger(demo).set_index("clip_id")["track"]
    for c in state["clips"]:
        rows = tracks.get(c["clip_id"], pd.DataFrame(columns=["person_id"]))
        assert c["persons"] == sorted(set(rows["person_id"])), c["clip_id"]
        assert len(c["persons"]) == int(persons[c["clip_id"]]), c["clip_id"]  # the ledger counts the same
        if c["persons"]:
            assert page.get(f"/api/clips/{c['clip_id']}").get_json()["boxes"] == page_boxes(rows)
    assert sum(len(c["persons"]) for c in state["clips"]) == sum(map(int, persons[kept_clips(demo)])) > 0


def free_action(wd, clip: str, person: int) -> int:
    """An action of the label map that the person does not have yet in the run's labels."""
    taken = set(labels.read_actions(wd / "annotations" / "demo_actions.csv").query(
        f"video_id == '{clip}' and person_id == '{person}'").action)
    return next(int(i) for i in labels.read_label_map(wd / "annotations" / "label_map.pbtxt")["id"]
                if str(i) not in taken)


@pytest.mark.skipif(not CHROMIUM.is_file(), reason="needs Debian's chromium (apt-get install chromium)")
def test_microg4m_annotate_draws_the_boxes_in_chromium_and_a_label_reaches_the_export(demo):
    pytest.importorskip("playwright.sync_api")
    tracks, kept, label = track_file_rows(demo), kept_clips(demo), None
    # as a user: the page over the run's results, the labels where the workflow reads them
    server = subprocess.Popen([sys.executable, "-m", "microg4m.cli", "annotate", "--results", RESULTS, "--port", "0"],
                              cwd=demo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        printed = ""
        while not (url := re.search(r"http://\S+", printed)) and (line := server.stdout.readline()):
            printed += line
        assert url, printed
        with chromium_page(url.group(0) + f"#clip={kept[0]}") as (page, errors):  # else: the first not done
            for i, clip in enumerate(kept):  # every kept clip, with its first box drawn on the frame
                if i:
                    page.keyboard.press("n")
                page.wait_for_function(f"() => document.getElementById('clip-id').textContent === '{clip}'")
                assert page.locator("#clip-list div").all_inner_texts() == kept
                if clip not in tracks:
                    continue
                first = tracks[clip].sort_values(["frame_id", "person_id"]).iloc[0]
                wait_drawn(page, int(first.frame_id))  # the page opens a clip at its first frame with a box
                img, *scale = canvas_shot(page)
                x, y = left_edge(page, (first.xmin, first.ymin, first.xmax, first.ymax), scale)
                assert near(img, x, y, person_bgr(int(first.person_id))), (clip, int(first.frame_id))
                if label is None:  # the first clip with a person: its first person gets a new action
                    label = (clip, int(first.person_id), free_action(demo, clip, int(first.person_id)))
                    person = f".person[data-person='{label[1]}']"
                    count = page.locator(f"{person} .chip").count()
                    page.click(f"{person} .picker label[data-action='{label[2]}']")
                    page.wait_for_function(f"() => document.querySelectorAll(\"{person} .chip\").length === {count + 1}")
            assert errors == []
    finally:
        server.terminate()
        server.wait(timeout=60)
    clip, person, action = label
    ctype = ResultsIndex(demo / RESULTS).clip(clip).clip_type
    assert f"{clip},{ctype},{person},{action}" in (demo / "annotations" / "demo_actions.csv").read_text().splitlines()
    assert jobs_ran(run(demo)) == {"export": 1, "all": 1}
    ava = pd.read_csv(demo / RESULTS / "export" / "ava_format_with_header.csv", dtype={"video_id": str})
    assert len(ava[(ava.video_id == clip) & (ava.person_id == person) & (ava.action_id == action)]) == 1


def test_team_mode_shows_the_persons_of_the_track_file_and_two_agreeing_labels_are_final(demo, tmp_path):
    project = make_project(tmp_path, results=demo / RESULTS, annotators=("alice", "bob"), k=2)
    tracks = track_file_rows(demo)
    with serving(create_team_app(project, {"127.0.0.1", "localhost"})) as port:
        alice, bob = Client(port).login("alice"), Client(port).login("bob")
        status, state, _ = alice.request("GET", "/api/state")
        assert status == 200 and [c["clip_id"] for c in state["clips"]] == kept_clips(demo)
        for c in state["clips"]:
            rows = tracks.get(c["clip_id"], pd.DataFrame(columns=["person_id"]))
            assert c["persons"] == sorted(set(rows["person_id"])), c["clip_id"]
        clip = next(c for c in state["clips"] if c["persons"])
        for user in (alice, bob):
            status, out, _ = user.post("/api/actions", {"clip_id": clip["clip_id"], "person_id": clip["persons"][0],
                                                        "action": 12, "op": "add"})
            assert status == 200, out
    final = pd.read_csv(project.settings.actions, dtype=str)
    assert final.values.tolist() == [[clip["clip_id"], clip["clip_type"], str(clip["persons"][0]), "12"]]


def test_the_caption_review_drafts_each_unit_and_the_reviewed_text_is_exported(demo, tmp_path):
    config = demo / "config" / "config.yaml"
    cfg = yaml.safe_load(config.read_text())
    with StubVLM(model=MODEL, api_key=None, frames=2, frame_size=128) as stub:
        cfg["vqa"]["draft"].update(enabled=True, url=stub.url, model=MODEL, frames=2, frame_size=128, retries=1,
                                   backoff_seconds=0, timeout_seconds=10, caption_prompt="Clip: $video_id",
                                   qa_prompt="Clip: $video_id. $caption")
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        index = ResultsIndex(demo / RESULTS)
        assert jobs_ran(run(demo)) == {"vqa_draft": len(index.units()), "vqa_export": 1, "all": 1}
        assert stub.problems == []
    assert all(index.files(u).vqa_drafts.is_file() for u in index.units())
    tracks = track_file_rows(demo)
    clip = next(c for c in reversed(kept_clips(demo)) if c in tracks)
    reviews = demo / "annotations" / "vqa_reviews.json"  # vqa.reviews: where the workflow reads them
    page = page_app(demo, tmp_path, vqa_reviews=str(reviews))
    draft = page.get(f"/api/vqa/{clip}").get_json()["draft"]
    assert draft["status"] == "ok" and draft["caption"] == CAPTION
    # the clip the reviewer looks at shows the persons of its track file
    persons = page.get(f"/api/clips/{clip}").get_json()["persons"]
    assert persons and persons == sorted(set(tracks[clip].person_id))
    pairs = draft["qa_pairs"][:2]
    r = page.post("/api/vqa", json={"clip_id": clip, "caption": draft["caption"], "qa_pairs": pairs,
                                    "reviewed": True, "base": None, "from_draft": True})
    assert r.status_code == 200, r.get_json()
    assert jobs_ran(run(demo)) == {"vqa_export": 1, "all": 1}
    want = [{"video_id": clip, "caption": CAPTION, "qa_pairs": pairs}]
    assert json.loads((demo / RESULTS / "vqa" / "vqa_and_captioning.json").read_text()) == want
    cli(demo, "vqa-export", RESULTS, str(tmp_path / "vqa"), "--reviews", str(reviews))
    assert (tmp_path / "vqa" / "vqa_and_captioning.json").read_bytes() == (
        demo / RESULTS / "vqa" / "vqa_and_captioning.json").read_bytes()


def test_the_cvat_round_trip_corrects_one_clip_of_a_unit_of_several_sources(demo, tmp_path):
    index = ResultsIndex(demo / RESULTS)
    tracks = track_file_rows(demo)
    clip = next(c for c in kept_clips(demo) if c in tracks and index.clip(c).source_id != index.units()[
        index.clip(c).unit][0])  # a clip of a unit's second or later source
    unit = index.clip(clip).unit
    where = json.loads(cli(demo, "where", clip, "--results", RESULTS))
    assert where["unit"] == unit and where["clip_files"]["mp4"] == f"{RESULTS}/clips/{unit}/{clip}.mp4"
    assert where["clip_files"]["cvat"] == f"{RESULTS}/cvat/{unit}/{clip}.xml"
    page = page_app(demo, tmp_path)
    before = page.get(f"/api/clips/{clip}").get_json()["boxes"]
    # as in CVAT: every box of the clip's first person moves 4 px left (right if at the left edge)
    tree = ET.parse(demo / where["clip_files"]["cvat"])
    track = tree.getroot().find("track")
    boxes = track.findall("box")
    dx = -4.0 if min(float(b.get("xtl")) for b in boxes) >= 4 else 4.0
    for b in boxes:
        for c in ("xtl", "xbr"):
            b.set(c, f"{float(b.get(c)) + dx:.2f}")
    person = int(track.find("box/attribute[@name='person_id']").text)
    folder = demo / "annotations" / "corrections"
    folder.mkdir(exist_ok=True)
    tree.write(folder / "annotations.xml", encoding="utf-8", xml_declaration=True)
    assert jobs_ran(run(demo)) == {"track_files": 1, "export": 1, "ledger": 1, "all": 1}  # that unit only
    report = pd.read_csv(index.files(unit).corrections_report, sep="\t", dtype=str)
    assert report[["clip_id", "status"]].values.tolist() == [[clip, "applied"]]
    after = page.get(f"/api/clips/{clip}").get_json()["boxes"]
    moved = {f: [[p, round(x1 + dx, 2), y1, round(x2 + dx, 2), y2] if p == person else [p, x1, y1, x2, y2]
                 for p, x1, y1, x2, y2 in bs] for f, bs in before.items()}
    assert after == moved and after == page_boxes(track_file_rows(demo)[clip])


def test_the_command_line_finds_each_units_files(demo, tmp_path):
    index = ResultsIndex(demo / RESULTS)
    where = json.loads(cli(demo, "where", "dancer", "--results", RESULTS))
    unit = index.unit_of("dancer")
    assert where["unit"] == unit and where["sources"] == index.units()[unit] and len(where["sources"]) == 4
    assert where["files"]["final_tracks"] == f"{RESULTS}/corrected/{unit}.csv"
    # the command it gives forces the track job of that unit (and what follows) under auto
    target = where["forcerun"].split("--forcerun ", 1)[1]
    planned = jobs_ran(run(demo, "-n", "--forcerun", target))
    assert planned["track"] == 1 and "detect" not in planned and planned["ledger"] == 1
    # ledger and export from the results folder alone give what the workflow wrote
    out = pd.read_csv(io.StringIO(cli(demo, "ledger", RESULTS)), sep="\t", dtype=str, keep_default_na=False)
    pd.testing.assert_frame_equal(out, ledger(demo))
    cli(demo, "export", RESULTS, str(tmp_path / "export"), "--actions", "annotations/demo_actions.csv")
    for name in ("boxes.csv", "ava_format.csv", "annotation_template.csv"):
        assert (tmp_path / "export" / name).read_bytes() == (demo / RESULTS / "export" / name).read_bytes(), name
