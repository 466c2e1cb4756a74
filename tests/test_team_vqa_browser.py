"""Captions and QA pairs in team mode, in a real headless Chromium: two reviewers edit
one clip's caption and pairs differently (each starting from the model's draft), the
adjudicator sees both versions side by side with word-level diffs and the clip's frames,
merges them, and the export's ``vqa_and_captioning.json`` holds exactly the merged
version, in the released schema.

The drafts come from the real drafting stage against the protocol stand-in server
(vlm_stub: not a model); the team app runs on the production server (waitress); the
clips are copies of one real H.264 clip; each user has their own browser context.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from microg4m.vqa import export as vqa_export
from microg4m.annotate.team import vqa_review
from microg4m.annotate.team.server import create_app

from team_setup import history_rows, make_project, serving
from test_annotate_browser import ARGS, CHROMIUM
from test_annotate_store import clip_video, copies_of, unit_inputs  # noqa: F401  (fixture)
from test_team_browser import login, wait_text
from test_vqa_browser import MODEL, draft
from test_vqa_review import RELEASED_SCHEMA
from vlm_stub import CAPTION, StubVLM

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason="needs Debian's chromium (apt-get install chromium)")

ALICE_CAPTION = CAPTION.replace("a blue shirt", "a dark blue shirt")
BOB_CAPTION = CAPTION.replace(" and a handrail", "")
NEW_PAIR = {"Q": "How many people are in the clip?", "A": "One."}


@pytest.fixture
def team(tmp_path, clip_video):  # noqa: F811
    video, size = clip_video
    project = make_project(tmp_path, clip_maker=copies_of(video, size), size=size)
    res = Path(project.settings.results)
    with StubVLM(model=MODEL, api_key=None, frames=2, frame_size=128) as stub:
        draft(res, stub)
    with serving(create_app(project, {"127.0.0.1", "localhost"})) as port:
        yield f"http://127.0.0.1:{port}", project, tmp_path


def row(i: int) -> str:
    return f"#qa-list .qa-row:nth-child({i})"


def open_draft(page, clip: str) -> None:
    page.click(f"#clip-list div[data-clip='{clip}']")
    wait_text(page, "#clip-id", clip)
    page.wait_for_function("([c]) => document.getElementById('caption').value === c", arg=[CAPTION])
    assert f"draft from {MODEL}" in page.inner_text("#vqa-source")


def hand_in(page) -> None:
    """Tick "reviewed by a person": saves the version and hands it in."""
    with page.expect_response("**/api/vqa") as resp:
        page.check("#vqa-reviewed")
    assert resp.value.status == 200, resp.value.json()
    page.wait_for_function("() => document.getElementById('vqa-status').textContent.startsWith('saved')")


def test_two_reviewers_edit_differently_and_the_adjudicator_merges(team):
    url, project, tmp = team
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            # alice: the draft is in her editors; she changes a word and drops a pair
            alice, alice_errors = login(browser, url, "alice")
            wait_text(alice, "#clip-id", "dancer_000")
            open_draft(alice, "dancer_000")
            assert alice.locator("#qa-list .qa-row").count() == 6 and alice.is_disabled("#qa-add")
            unans = [alice.is_checked(f"{row(i)} .unans") for i in range(1, 7)]
            gone = 6 if not unans[5] else 5
            dropped_q = alice.input_value(f"{row(gone)} .q")
            alice.fill("#caption", ALICE_CAPTION)
            alice.click(f"{row(gone)} .del")
            hand_in(alice)

            # bob: his own version from the same draft (not alice's); a shorter caption, one new pair
            bob, bob_errors = login(browser, url, "bob")
            wait_text(bob, "#clip-id", "dancer_000")
            open_draft(bob, "dancer_000")
            bob.fill("#caption", BOB_CAPTION)
            bob.click(f"{row(1 if not unans[0] else 2)} .del")
            bob.click("#qa-add")
            bob.keyboard.type(NEW_PAIR["Q"])
            bob.fill(f"{row(6)} .a", NEW_PAIR["A"])
            hand_in(bob)

            conn = project.connect()
            versions = vqa_review.read_clip(conn, "dancer_000").versions
            conn.close()
            assert versions["alice"]["caption"] == ALICE_CAPTION, versions
            assert versions["bob"]["caption"] == BOB_CAPTION, versions
            assert NEW_PAIR in versions["bob"]["qa_pairs"] and NEW_PAIR not in versions["alice"]["qa_pairs"]
            assert not project.reviews.path.exists()  # they differ: nothing final yet

            # judy: the versions side by side, diffs against the draft and each other, the frames
            judy, judy_errors = login(browser, url, "judy")
            judy.wait_for_url(url + "/adjudicate")
            judy.click("#to-captions")
            judy.wait_for_url(url + "/adjudicate/captions")
            wait_text(judy, "#counts", "1 to adjudicate · 0 resolved · 0 agreed · 2 pending")
            wait_text(judy, "#clip-id", "dancer_000")
            views = judy.locator(".tview")
            assert views.locator("h3").all_inner_texts() == ["alice", "bob"]
            a_draft = judy.locator(".tview[data-reviewer='alice'] .against[data-against='draft']")
            assert a_draft.locator(".cap-diff ins").all_inner_texts() == ["dark"]
            assert a_draft.locator("li.state-dropped").count() == 1
            assert dropped_q in a_draft.locator("li.state-dropped").inner_text()
            b_draft = judy.locator(".tview[data-reviewer='bob'] .against[data-against='draft']")
            assert "handrail," in " ".join(b_draft.locator(".cap-diff del").all_inner_texts())
            assert "lockers," in " ".join(b_draft.locator(".cap-diff ins").all_inner_texts())
            assert b_draft.locator("li.state-added").count() == 1
            a_bob = judy.locator(".tview[data-reviewer='alice'] .against[data-against='bob']")
            assert a_bob.count() == 1 and a_bob.locator(".cap-diff ins").count() >= 1
            judy.wait_for_function("() => T.images[T.frame - 1].complete && T.images[T.frame - 1].naturalWidth > 0")
            judy.wait_for_timeout(150)
            import cv2
            import numpy as np
            img = cv2.imdecode(np.frombuffer(judy.locator("#frame").screenshot(), np.uint8), cv2.IMREAD_COLOR)
            assert img.mean() > 20  # the clip's frame, not the empty canvas

            # merge: alice's version as the start, bob's new pair, then an edit of the caption
            judy.locator(".tview[data-reviewer='alice'] .use-all").click()
            judy.locator(".tview[data-reviewer='bob'] .vpairs li", has_text=NEW_PAIR["Q"]).locator(
                ".add-pair").click()
            assert judy.locator("#t-pairs .qa-row").count() == 6 and judy.is_disabled("#t-add")
            merged_caption = ALICE_CAPTION.replace("white lockers and a handrail", "white lockers")
            judy.fill("#t-caption", merged_caption)
            judy.fill("#t-note", "alice's caption without the handrail, bob's question")
            judy.click("#t-save")
            wait_text(judy, "#t-status", "saved")
            wait_text(judy, "#counts", "0 to adjudicate · 1 resolved · 0 agreed · 2 pending")
            rows = judy.locator("#text-fig-reviewers tr").all_inner_texts()
            assert [r.split("\t")[0] for r in rows[1:]] == ["alice", "bob"]
            assert [r.split("\t")[-2] for r in rows[1:]] == ["1", "1"]  # the final changed both versions
            assert judy_errors == alice_errors == bob_errors == []
        finally:
            browser.close()

    merged = {"video_id": "dancer_000", "caption": merged_caption,
              "qa_pairs": versions["alice"]["qa_pairs"] + [NEW_PAIR]}
    entry = json.loads(project.reviews.path.read_text())["clips"]["dancer_000"]
    assert (entry["caption"], entry["qa_pairs"], entry["reviewer"]) == (merged["caption"], merged["qa_pairs"], "judy")
    # the export stage (what the workflow's vqa_export rule runs) writes exactly the merged version
    res = Path(project.settings.results)
    inputs = unit_inputs(res)
    summary = vqa_export.run(manifests=inputs["manifests"], decisions=inputs["decisions"], reviews=project.reviews.path,
                             out_dir=tmp / "vqa")
    out = json.loads((tmp / "vqa" / "vqa_and_captioning.json").read_text(encoding="utf-8"))
    jsonschema.validate(out, RELEASED_SCHEMA)
    assert summary["exported"] == 1 and out == [merged]
    conn = project.connect()
    assert project.rebuild(conn, check=True)["differ"] == []
    conn.close()
    whos = [(r["who"], r["kind"]) for r in history_rows(project) if r["kind"].startswith("text")]
    assert whos == [("alice", "text"), ("bob", "text"), ("judy", "text"), ("judy", "text_note"),
                    ("judy", "text_resolved")]
