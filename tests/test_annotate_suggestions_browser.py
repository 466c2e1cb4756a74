"""The VLM's suggestions on the labelling page in a real headless Chromium (Debian's, driven
by Playwright), single-user and team mode: shown pre-ticked and marked as suggestions,
nothing saved by loading or reloading the page, saved only on a click, and the outcome of
each save recorded. The answers come from the real stage (test_annotate_suggestions.py)."""

from __future__ import annotations

import pytest

from microg4m.annotate.app import create_app
from microg4m.annotate.team.server import create_app as create_team_app
from microg4m.formats.labels import read_label_map

from browser import CHROMIUM, chromium_page
from team_setup import HEADER, history_rows, make_project, serving
from test_annotate_browser import chips
from test_annotate_store import LABEL_MAP, clip_video  # noqa: F401  (fixture)
from test_annotate_detections import detected  # noqa: F401  (fixture)
from test_annotate_suggestions import answered  # noqa: F401  (fixture)
from test_evaluate_vlm import MODEL
from test_team_browser import login, wait_text

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason="needs Debian's chromium (apt-get install chromium)")
NAME = dict(zip(read_label_map(LABEL_MAP)["id"], read_label_map(LABEL_MAP)["name"]))
CARD = ".person[data-person='{}']"
TICKED = """() => [...document.querySelectorAll('.person.selected .picker label')]
    .filter((l) => l.querySelector('input').checked)
    .map((l) => [Number(l.dataset.action), l.classList.contains('suggested')])"""


def suggested_chips(page, person: int) -> int:
    return page.locator(f"{CARD.format(person)} .chip.suggested").count()


def note(page, person: int) -> str:
    return page.inner_text(f"{CARD.format(person)} .suggestion-note")


def test_single_user_page_marks_suggestions_and_saves_them_only_on_a_click(tmp_path, answered):  # noqa: F811
    ann = tmp_path / "annotations"
    actions, log = ann / "actions.csv", ann / "actions.suggestions.tsv"
    app = create_app(str(answered), str(actions), str(ann / "screening_excluded.txt"), str(LABEL_MAP))
    with serving(app) as port, chromium_page(f"http://127.0.0.1:{port}/?token={app.config['ACCESS_TOKEN']}") \
            as (page, errors):
        page.wait_for_selector(f"{CARD.format(1)} .suggestion-note")
        assert page.inner_text("#clip-id") == "dancer_000"
        # shown: ticked, marked, named as the model's, not saved
        assert chips(page, 1) == [NAME[12], NAME[17]] and suggested_chips(page, 1) == 2
        assert note(page, 1).startswith(f"suggested by {MODEL}: not saved until you click")
        assert page.evaluate(TICKED) == [[12, True], [17, True]]
        assert chips(page, 2) == [NAME[14]] and suggested_chips(page, 2) == 1
        assert page.inner_text("#progress-text") == "0 / 4 clips done"
        assert "[99] not in the label map" in page.inner_text("#problems")  # dancer_001's answer
        page.reload()
        page.wait_for_selector(f"{CARD.format(1)} .chip.suggested")
        assert not ann.exists()  # loading and reloading saved nothing

        # person 1: "clear" unticks (nothing saved), "accept" saves the suggested set
        page.click(f"{CARD.format(1)} .clear-suggestion")
        assert chips(page, 1) == [] and page.evaluate(TICKED) == []
        assert note(page, 1) == f"suggested by {MODEL}: {NAME[12]}, {NAME[17]} (not ticked) accept"
        assert not ann.exists()
        with page.expect_response("**/api/actions"):
            page.click(f"{CARD.format(1)} .accept-suggestion")
        page.wait_for_function(f"() => document.querySelectorAll(\"{CARD.format(1)} .chip\").length === 2")
        assert suggested_chips(page, 1) == 0 and note(page, 1).endswith("(accepted)")
        assert actions.read_text() == HEADER + "dancer_000,r,1,12\ndancer_000,r,1,17\n"

        # person 2: one more box ticked: one click saves the set as shown
        page.click(f"{CARD.format(2)} h3")
        page.wait_for_selector(".person.selected[data-person='2']")
        assert page.evaluate(TICKED) == [[14, True]]
        with page.expect_response("**/api/actions"):
            page.click(".person.selected .picker label[data-action='11']")
        page.wait_for_function(f"() => !document.querySelector(\"{CARD.format(2)} .chip.suggested\")")
        assert chips(page, 2) == [NAME[14], NAME[11]] and note(page, 2).endswith("(edited)")
        assert page.evaluate(TICKED) == [[11, False], [14, False]]
        assert actions.read_text().endswith("dancer_000,r,2,14\ndancer_000,r,2,11\n")
        assert page.inner_text("#progress-text") == "1 / 4 clips done"

        # a clip whose answer gave no suggestion: no note, nothing ticked
        page.click("#clip-list div[data-clip='dancer_001']")
        page.wait_for_function("() => document.getElementById('clip-id').textContent === 'dancer_001'")
        assert page.locator(".suggestion-note").count() == 0 and page.evaluate(TICKED) == []

        page.reload()
        page.wait_for_selector("#suggestion-summary:not([hidden])")
        assert page.inner_text("#suggestion-summary") == "suggestions: 1 accepted · 1 edited · 0 removed"
        assert errors == []
    assert [line.split("\t")[-1] for line in log.read_text().splitlines()] == ["outcome", "accepted", "edited"]


def test_team_page_marks_suggestions_and_records_the_outcome(tmp_path, answered):  # noqa: F811
    project = make_project(tmp_path, results=answered)
    with serving(create_team_app(project, {"127.0.0.1", "localhost"})) as port:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox"])
            try:
                page, errors = login(browser, f"http://127.0.0.1:{port}", "alice")
                page.click("#clip-list div[data-clip='dancer_000']")
                wait_text(page, "#clip-id", "dancer_000")
                page.wait_for_selector(f"{CARD.format(1)} .chip.suggested")
                assert chips(page, 1) == [NAME[12], NAME[17]] and note(page, 1).startswith(f"suggested by {MODEL}")
                before = history_rows(project)
                page.reload()
                page.wait_for_selector(f"{CARD.format(1)} .chip.suggested")
                assert history_rows(project) == before  # GETs wrote nothing
                # untick one suggested box: the rest is saved, the suggestion edited
                with page.expect_response("**/api/actions"):
                    page.click(".person.selected .picker label[data-action='17']")
                page.wait_for_function(f"() => !document.querySelector(\"{CARD.format(1)} .chip.suggested\")")
                assert chips(page, 1) == [NAME[12]] and note(page, 1).endswith("(edited)")
                assert errors == []
            finally:
                browser.close()
    new = history_rows(project)[len(before):]
    assert [(r["layer"], r["person_id"], r["after"], r["outcome"]) for r in new] == [("alice", 1, "[12]", "edited")]


def test_a_models_detections_are_pre_ticked_and_an_edit_is_logged(tmp_path, detected):  # noqa: F811
    """``microg4m annotate --suggest DETECTIONS.csv``: the detections matched to dancer_000's
    person 1 (stand, carry/hold) are pre-ticked; unticking one saves the other, logged as edited."""
    res, path = detected
    ann = tmp_path / "annotations"
    actions, log = ann / "actions.csv", ann / "actions.suggestions.tsv"
    app = create_app(str(res), str(actions), str(ann / "screening_excluded.txt"), str(LABEL_MAP),
                     detections={"detections": str(path), "score": 0.5, "iou_min": 0.5})
    with serving(app) as port, chromium_page(f"http://127.0.0.1:{port}/?token={app.config['ACCESS_TOKEN']}") \
            as (page, errors):
        page.wait_for_selector(f"{CARD.format(1)} .suggestion-note")
        assert page.inner_text("#clip-id") == "dancer_000"
        assert chips(page, 1) == [NAME[12], NAME[17]] and suggested_chips(page, 1) == 2
        assert chips(page, 2) == [NAME[14]] and suggested_chips(page, 2) == 1
        assert note(page, 1).startswith(f"suggested by {path.name}: not saved until you click")
        assert page.evaluate(TICKED) == [[12, True], [17, True]]
        assert "nosuch_000" in page.inner_text("#problems")
        assert not ann.exists()
        with page.expect_response("**/api/actions"):
            page.click(".person.selected .picker label[data-action='17']")
        page.wait_for_function(f"() => !document.querySelector(\"{CARD.format(1)} .chip.suggested\")")
        assert chips(page, 1) == [NAME[12]] and note(page, 1).endswith("(edited)")
        assert errors == []
    assert actions.read_text() == HEADER + "dancer_000,r,1,12\n"
    rows = [line.split("\t") for line in log.read_text().splitlines()]
    assert [r[2:] for r in rows[1:]] == [["dancer_000", "1", path.name, rows[1][5], "12 17", "12", "edited"]]
