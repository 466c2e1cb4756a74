"""The caption and QA-pair editors in a real headless Chromium (Debian's, via Playwright).

The drafts come from the real drafting stage against the protocol stand-in server
(vlm_stub: not a model); the page is the real app over real clips. Checks the
pre-filled draft, the six-pair and one-unanswerable limits, the sound warning, saving,
reviewing, reloading, that a newer draft does not replace the person's edit, a refused
save, and that leaving a clip saves it.
"""

from __future__ import annotations

import json

import pytest

from microg4m.formats.results_index import ResultsIndex
from microg4m.vqa import draft as vqa_draft
from test_annotate_browser import ARGS, CHROMIUM
from team_setup import serving
from test_annotate_store import clip_video, make_app  # noqa: F401  (fixture)
from vlm_stub import CAPTION, DOWN, StubVLM

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason="needs Debian's chromium (apt-get install chromium)")
MODEL = "stub/vlm"


def draft(res, stub):
    index = ResultsIndex(res)
    for files in map(index.files, index.units()):
        vqa_draft.run(files.manifest, files.decisions, files.vqa_drafts, url=stub.url, model=MODEL, frames=2, frame_size=128,
                      caption_prompt="Clip: $video_id", qa_prompt="Clip: $video_id. $caption", retries=1,
                      backoff_seconds=0, timeout_seconds=5)


@pytest.fixture
def served(tmp_path, clip_video):  # noqa: F811
    app, res, ann = make_app(tmp_path, clip_video, "alice")
    with serving(app) as port, StubVLM(model=MODEL, api_key=None, frames=2, frame_size=128,
                                       behaviour={"dancer_001": DOWN}) as stub:
        draft(res, stub)
        # the address microg4m annotate prints: the access token goes into a cookie
        yield (f"http://127.0.0.1:{port}/?token={app.config['ACCESS_TOKEN']}", res, ann / "vqa_reviews.json",
               lambda: draft(res, stub))


def q(page, i):
    return f"#qa-list .qa-row:nth-child({i})"


def wait_text(page, selector, text):
    page.wait_for_function("([s, t]) => document.querySelector(s).textContent.includes(t)", arg=[selector, text])


def test_caption_and_qa_editors_save_review_reload_and_keep_the_persons_edit(served):
    url, res, reviews, redraft = served
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            page.wait_for_function("([c]) => document.getElementById('caption').value === c", arg=[CAPTION])
            assert f"draft from {MODEL}" in page.inner_text("#vqa-source")
            assert page.locator("#qa-list .qa-row").count() == 6 and page.inner_text("#qa-count") == "6 / 6"
            assert page.is_disabled("#qa-add")  # six pairs at most
            # the draft's unanswerable pair: answer fixed to "Not mentioned"; no second one can be ticked
            un = [page.is_checked(f"{q(page, i)} .unans") for i in range(1, 7)]
            assert un.count(True) == 1
            k = un.index(True) + 1
            assert page.input_value(f"{q(page, k)} .a") == "Not mentioned"
            assert page.get_attribute(f"{q(page, k)} .a", "readonly") is not None
            assert all(page.is_disabled(f"{q(page, i)} .unans") for i in range(1, 7) if i != k)
            assert page.locator("#clip-list div.vqa-draft").count() == 2  # dancer_000, film_000

            # edit: a question about sound gets a warning; remove a pair, add one, new caption
            first = 1 if k != 1 else 2
            page.fill(f"{q(page, first)} .q", "What does the dancer hear?")
            assert "about sound" in page.inner_text(f"{q(page, first)} .warn")
            page.click(f"{q(page, 6 if k != 6 else 5)} .del")
            assert page.inner_text("#qa-count") == "5 / 6" and not page.is_disabled("#qa-add")
            page.click("#qa-add")
            page.keyboard.type("Where is the dancer?")  # the new question has the focus
            page.fill(f"{q(page, 6)} .a", "In front of a blue wall.")
            page.fill("#caption", "A dancer in black stands in front of a blue wall.")
            assert page.inner_text("#vqa-status") == "unsaved changes"
            page.keyboard.press("Control+s")
            page.wait_for_function("() => document.getElementById('vqa-status').textContent.startsWith('saved ')")  # not "unsaved changes"
            entry = json.loads(reviews.read_text())["clips"]["dancer_000"]
            assert entry["caption"] == "A dancer in black stands in front of a blue wall."
            assert len(entry["qa_pairs"]) == 6 and entry["qa_pairs"][5] == {"Q": "Where is the dancer?",
                                                                           "A": "In front of a blue wall."}
            assert entry["reviewed"] is False and entry["reviewer"] == "alice"
            assert entry["draft"]["model"] == MODEL and entry["draft"]["prompt_hash"]
            page.check("#vqa-reviewed")  # ticking "reviewed" saves
            page.wait_for_function("() => document.querySelector('#clip-list div.vqa-reviewed') !== null")
            assert json.loads(reviews.read_text())["clips"]["dancer_000"]["reviewed"] is True

            # a new draft run, then reload: the person's edit stays; the draft can be loaded by hand
            saved = reviews.read_bytes()
            redraft()
            page.reload()
            page.wait_for_function("() => document.getElementById('caption').value.startsWith('A dancer in black')")
            assert page.is_checked("#vqa-reviewed")
            assert "edited by alice" in page.inner_text("#vqa-source")
            assert "exists: not applied" in page.inner_text("#vqa-source")
            page.click("#vqa-load-draft")
            assert page.input_value("#caption") == CAPTION and page.inner_text("#vqa-status") == "unsaved changes"
            assert reviews.read_bytes() == saved

            # an answer that only looks unanswerable is refused by the server; nothing written
            free = next(i for i in range(1, 7) if not page.is_checked(f"{q(page, i)} .unans"))
            page.fill(f"{q(page, free)} .a", "not mentioned.")
            page.click("#vqa-save")
            page.wait_for_selector("#toast:not([hidden])")
            assert "exactly 'Not mentioned'" in page.inner_text("#toast")
            assert reviews.read_bytes() == saved and page.inner_text("#vqa-status").startswith("not saved")

            # leaving the clip tries to save (refused again); coming back shows the unsaved text
            page.click("#clip-list div[data-clip='dancer_001']")
            wait_text(page, "#vqa-source", "draft failed: caption: HTTP 500")
            assert page.input_value("#caption") == ""
            page.click("#clip-list div[data-clip='dancer_000']")
            page.wait_for_function("([c]) => document.getElementById('caption').value === c", arg=[CAPTION])
            assert page.input_value(f"{q(page, free)} .a") == "not mentioned."
            page.fill(f"{q(page, free)} .a", "A blue wall.")
            page.click("#clip-list div[data-clip='film_000']")  # leaving saves the fixed text
            wait_text(page, "#clip-id", "film_000")
            page.wait_for_function("() => !document.getElementById('vqa').classList.contains('dirty')")
            page.wait_for_function("([c]) => document.getElementById('caption').value === c", arg=[CAPTION])
            entry = json.loads(reviews.read_text())["clips"]["dancer_000"]
            assert entry["caption"] == CAPTION and {"Q": entry["qa_pairs"][free - 1]["Q"], "A": "A blue wall."} \
                in entry["qa_pairs"]
            assert errors == []
        finally:
            browser.close()
