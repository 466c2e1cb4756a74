"""Team mode in a real headless Chromium: two annotators label the same clips
differently, the adjudicator resolves, and the export reads the final labels.

The real team app serves a small results folder whose clips are copies of one real
H.264 clip (as in test_annotate_browser.py); each user has their own browser context
(own cookies) and logs in through the login form.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from microg4m.stages import export
from microg4m.annotate.team.server import create_app

from team_setup import HEADER, SCREENING_HEADER, Client, history_rows, make_project, password, serving
from test_annotate_browser import ARGS, BGR, CHROMIUM, near
from test_annotate_store import LABEL_MAP, clip_video, copies_of, unit_inputs  # noqa: F401  (fixture)
from microg4m.formats.decisions import read_screening

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason="needs Debian's chromium (apt-get install chromium)")


@pytest.fixture
def team(tmp_path, clip_video):  # noqa: F811
    video, size = clip_video
    project = make_project(tmp_path, clip_maker=copies_of(video, size), size=size)
    with serving(create_app(project, {"127.0.0.1", "localhost"})) as port:
        yield f"http://127.0.0.1:{port}", project, tmp_path


def login(browser, url: str, name: str):
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + "/")
    assert page.url.endswith("/login")  # not logged in: sent to the login form
    page.fill("#name", name)
    page.fill("#password", password(name))
    page.click("#submit")
    return page, errors


def wait_text(page, selector: str, text: str) -> None:
    try:
        page.wait_for_function("([s, t]) => document.querySelector(s) && document.querySelector(s).textContent === t",
                               arg=[selector, text], timeout=15_000)
    except playwright.TimeoutError:
        got = page.evaluate("s => document.querySelector(s) && document.querySelector(s).textContent", selector)
        raise AssertionError(f"{selector}: {got!r}, expected {text!r}") from None


def label(page, clip: str, choices: dict, exclude: str | None = None) -> None:
    """On the annotator's page (annotate.js): open ``clip``, give each person its actions."""
    page.click(f"#clip-list div[data-clip='{clip}']")
    wait_text(page, "#clip-id", clip)
    if exclude is not None:
        # x excludes at once; the reason follows (typed only once the exclusion is answered:
        # annotate.js puts the answer's reason into the box, which would eat early keystrokes)
        with page.expect_response("**/api/screening"):
            page.keyboard.press("x")
        page.keyboard.type(exclude)
        with page.expect_response("**/api/screening"):
            page.keyboard.press("Enter")
        page.wait_for_function("() => document.getElementById('screen-status').textContent.startsWith('excluded')")
        return
    for person, actions in choices.items():
        page.click(f".person[data-person='{person}'] h3")
        page.wait_for_selector(f".person.selected[data-person='{person}']")
        for aid in actions:
            page.click(f".person.selected .picker label[data-action='{aid}']")
            page.wait_for_selector(f".person.selected .picker label[data-action='{aid}'] input:checked")


def test_two_annotators_an_adjudicator_and_the_export(team):
    url, project, tmp = team
    actions, screening = Path(project.settings.actions), Path(project.settings.screening)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            # alice and bob: the same queue (k = 2, two annotators), different labels
            alice, alice_errors = login(browser, url, "alice")
            wait_text(alice, "#clip-id", "dancer_000")
            assert alice.inner_text("#annotator") == "annotator: alice"
            assert alice.locator("#clip-list div").all_inner_texts() == ["dancer_000", "dancer_001", "film_000"]
            assert alice.inner_text("#progress-text") == "0 / 3 clips done"
            label(alice, "dancer_000", {1: [14], 2: [17]})   # walk; carry/hold
            label(alice, "dancer_001", {1: [14]})
            label(alice, "film_000", {}, exclude="too dark")
            wait_text(alice, "#progress-text", "3 / 3 clips done")

            bob, bob_errors = login(browser, url, "bob")
            wait_text(bob, "#clip-id", "dancer_000")
            label(bob, "dancer_000", {1: [12], 2: [17]})     # stand; carry/hold
            label(bob, "dancer_001", {1: [14]})
            label(bob, "film_000", {1: [14]})
            wait_text(bob, "#progress-text", "3 / 3 clips done")
            # bob's page shows bob's labels only
            bob.click("#clip-list div[data-clip='dancer_000']")
            wait_text(bob, "#clip-id", "dancer_000")
            assert [t.replace("×", "").strip() for t in bob.locator(".person[data-person='1'] .chip")
                    .all_inner_texts()] == ["stand"]

            # the clip they agree on is final at once; the others wait for the adjudicator
            assert actions.read_text() == HEADER + "dancer_001,r,1,14\n"
            assert screening.read_text() == SCREENING_HEADER

            judy, judy_errors = login(browser, url, "judy")
            judy.wait_for_url(url + "/adjudicate")
            wait_text(judy, "#counts", "2 to adjudicate · 0 resolved · 1 agreed · 0 pending")
            wait_text(judy, "#clip-id", "dancer_000")
            assert judy.eval_on_selector_all("#clip-list div", "els => els.map(e => [e.dataset.clip, "
                                             "e.querySelector('.st').textContent])") == [
                ["dancer_000", "disagree"], ["film_000", "disagree"]]
            views = judy.locator(".view")
            assert views.locator("h3").all_inner_texts() == ["alice", "bob"]
            assert views.locator(".summary").all_inner_texts() == [
                "Person 1: walk\nPerson 2: carry/hold (an object)", "Person 1: stand\nPerson 2: carry/hold (an object)"]
            # each annotator's canvas shows the clip's frame with the boxes (person 1's colour on its left edge)
            judy.wait_for_function("() => A.images[A.frame - 1].complete && A.images[A.frame - 1].naturalWidth > 0")
            judy.wait_for_timeout(150)
            import cv2
            import numpy as np
            for i in range(2):
                canvas = views.nth(i).locator("canvas")
                img = cv2.imdecode(np.frombuffer(canvas.screenshot(), np.uint8), cv2.IMREAD_COLOR)
                k = img.shape[1] / judy.evaluate(f"() => document.querySelectorAll('.view canvas')[{i}].width")
                assert near(img, 40 * k, 160 * k, BGR[1]), i
            # the final editor: the split votes are shown, the shared one is ticked
            p1 = judy.locator("#f-persons .fperson[data-person='1'] label")
            assert p1.all_inner_texts() == [" walk (alice)", " stand (bob)"]
            assert judy.locator("#f-persons .fperson[data-person='1'] input:checked").count() == 0
            assert judy.is_checked("#f-persons .fperson[data-person='2'] input[data-action='17']")
            judy.check("#f-persons .fperson[data-person='1'] input[data-action='14']")
            judy.check("#f-persons .fperson[data-person='1'] input[data-action='12']")
            judy.fill("#f-note", "walks, then stands")
            judy.click("#save")
            wait_text(judy, "#f-status", "saved")
            wait_text(judy, "#counts", "1 to adjudicate · 1 resolved · 1 agreed · 0 pending")
            judy.click("#history summary")  # who changed what on this clip
            judy.wait_for_selector("#history-rows tr:nth-child(2)")
            whos = [r.split("\t")[2] for r in judy.locator("#history-rows tr").all_inner_texts()[1:]]
            assert whos == ["alice"] * 2 + ["bob"] * 2 + ["judy"] * 4, whos  # 2 persons, note, resolved

            judy.click("#clip-list div[data-clip='film_000']")
            wait_text(judy, "#clip-id", "film_000")
            assert judy.locator(".view.excluded h3").all_inner_texts() == ["alice"]
            judy.check("#f-exclude")
            judy.fill("#f-reason", "too dark")
            judy.click("#save")
            wait_text(judy, "#f-status", "saved")
            wait_text(judy, "#counts", "0 to adjudicate · 2 resolved · 1 agreed · 0 pending")
            # agreement figures on the page, per annotator (changed_by_final: alice 1, bob 2)
            rows = judy.locator("#fig-annotators tr").all_inner_texts()
            # then the VLM's suggestions saved, accepted, edited, removed: none (no answers file here)
            assert [r.split("\t") for r in rows[1:]] == [["alice", "3", "1", "1", "3", "2", "1", "0", "0", "0", "0"],
                                                         ["bob", "3", "0", "1", "4", "2", "2", "0", "0", "0", "0"]]
            assert "carry/hold (an object)" in judy.inner_text("#fig-actions")
            judy.click("#write-report")
            judy.wait_for_selector("#toast:not([hidden])")
            assert judy_errors == alice_errors == bob_errors == []
        finally:
            browser.close()

    # the workflow's files hold the final labels, and the history gives the same files
    assert actions.read_text() == HEADER + ("dancer_000,r,1,14\ndancer_000,r,1,12\ndancer_000,r,2,17\n"
                                            "dancer_001,r,1,14\n")
    assert screening.read_text() == SCREENING_HEADER + "film_000  # too dark\n"
    assert read_screening(screening) == {"film_000"}
    conn = project.connect()
    assert project.rebuild(conn, check=True)["differ"] == []
    conn.close()
    notes = [r for r in history_rows(project) if r["kind"] == "note"]
    assert [(r["who"], r["clip_id"], r["after"]) for r in notes] == [("judy", "dancer_000", '"walks, then stands"')]
    report = Path(project.settings.report_dir)
    assert (report / "actions.alice.csv").read_text() == HEADER + "dancer_000,r,1,14\ndancer_000,r,2,17\n" \
                                                                  "dancer_001,r,1,14\n"
    assert "dancer_000\tresolved\talice,bob\tjudy\twalks, then stands" in (report / "adjudication.tsv").read_text()

    # the export stage (what the workflow's export rule runs) reads the final labels
    res = Path(project.settings.results)
    summary = export.run(**unit_inputs(res), out_dir=tmp / "export", actions=actions, label_map=LABEL_MAP)
    assert summary["label_rows"] == 4 and summary["label_problems"] == 0
    rows = [ln.split(",") for ln in (tmp / "export" / "ava_format.csv").read_text().splitlines()]
    assert sorted((r[0], int(r[7]), int(r[6])) for r in rows) == [
        ("dancer_000", 1, 12), ("dancer_000", 1, 14), ("dancer_000", 2, 17), ("dancer_001", 1, 14)]


EVIL = "crouch<img src=x onerror=window.__xss=1>"  # a label-map name that is also HTML


def test_a_label_name_is_text_on_the_adjudication_page(tmp_path):
    """The issue's case: a label map name with an image tag whose error handler runs script
    (innerHTML on /adjudicate ran it); the page must show it as text."""
    label_map = tmp_path / "label_map.pbtxt"
    label_map.write_text(LABEL_MAP.read_text().replace('name: "crouch/kneel"', f'name: "{EVIL}"'))
    project = make_project(tmp_path, label_map=str(label_map))  # no videos: the page and its labels only
    with serving(create_app(project, {"127.0.0.1", "localhost"})) as port:
        url = f"http://127.0.0.1:{port}"
        for name, action in (("alice", 3), ("bob", 14)):  # they disagree on dancer_001: the page opens it
            c = Client(port).login(name)
            assert c.post("/api/actions", {"clip_id": "dancer_001", "person_id": 1, "action": action,
                                           "op": "add"})[0] == 200
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                judy, errors = login(browser, url, "judy")
                judy.wait_for_url(url + "/adjudicate")
                wait_text(judy, "#clip-id", "dancer_001")
                option = "#f-persons select.add option[value='3']"
                judy.wait_for_selector(option, state="attached")
                judy.wait_for_timeout(500)  # time for an injected image to fail and run its handler
                assert judy.evaluate("() => window.__xss") is None
                assert judy.evaluate("() => document.querySelectorAll('main img, #final img').length") == 0
                assert judy.eval_on_selector(option, "o => o.textContent") == EVIL
                assert f"Person 1: {EVIL}" in judy.locator(".view .summary").all_inner_texts()
                assert errors == []
            finally:
                browser.close()
