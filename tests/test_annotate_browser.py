"""The annotation page in a real headless Chromium (Debian's, driven by Playwright).

A small results folder with real H.264 clips; the page is served by the real app on a
free port. Checks the boxes on the video canvas by the pixels of a screenshot, labels
with the keyboard and the mouse, excludes a clip, reloads, and reads the files back.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from browser import ARGS, CHROMIUM, canvas_shot, left_edge, near, person_bgr, wait_drawn  # noqa: F401  (ARGS, CHROMIUM: for the other page tests)
from microg4m.stages import export

from test_annotate_store import LABEL_MAP, clip_video, make_app, unit_inputs  # noqa: F401  (fixture)
from microg4m.formats.decisions import read_screening

playwright = pytest.importorskip("playwright.sync_api")
HEADER = "video_id,movie_or_real,person_id,action\n"
BGR = {1: person_bgr(1), 2: person_bgr(2)}  # (0, 200, 255) and (255, 128, 0)

pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason="needs Debian's chromium (apt-get install chromium)")


@pytest.fixture
def served(tmp_path, clip_video):  # noqa: F811
    app, res, ann = make_app(tmp_path, clip_video)
    from team_setup import serving

    with serving(app) as port:  # the production server; the address microg4m annotate prints (with the token)
        yield f"http://127.0.0.1:{port}/?token={app.config['ACCESS_TOKEN']}", res, ann


def last_line_becomes(path: Path, expected: str, timeout: float = 15) -> str:
    """The file's last line once it is ``expected`` (or at the timeout): "x" saves the
    exclusion at once and the typed reason in a second save that may still be on its way."""
    deadline = time.monotonic() + timeout
    while (last := path.read_text().splitlines()[-1]) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return last


def chips(page, person: int) -> list[str]:
    texts = page.locator(f".person[data-person='{person}'] .chip").all_inner_texts()
    return [t.replace("×", "").strip() for t in texts]


def test_page_draws_boxes_labels_excludes_and_keeps_state(served):
    url, res, ann = served
    actions, screening = ann / "actions.csv", ann / "screening_excluded.txt"
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            page.wait_for_function("() => document.getElementById('clip-id').textContent === 'dancer_000'")
            assert page.inner_text("#progress-text") == "0 / 4 clips done"
            wait_drawn(page, 1)

            # the boxes: person 1 from frame 1, person 2 from frame 20, in the preview colours
            img, *scale = canvas_shot(page)
            x, y = left_edge(page, (40, 40, 150, 280), scale)
            assert near(img, x, y, BGR[1]), img[int(y), int(x)]
            x2, y2 = left_edge(page, (180, 60, 300, 290), scale)
            assert not near(img, x2, y2, BGR[2])  # person 2 is not there yet
            for _ in range(19):
                page.keyboard.press("ArrowRight")
            assert page.inner_text("#frame-no") == "frame 20 / 90"
            wait_drawn(page, 20)
            img, *scale = canvas_shot(page)
            assert near(img, x2, y2, BGR[2]) and near(img, x, y, BGR[1])
            page.keyboard.press("b")  # boxes off: the same pixels show the video
            page.wait_for_timeout(100)
            img, *scale = canvas_shot(page)
            assert not near(img, x, y, BGR[1]) and not near(img, x2, y2, BGR[2])
            page.keyboard.press("b")

            # person 1: "walk" with the mouse, "stand" with the keyboard
            page.click(".person.selected .picker label[data-action='14']")
            page.wait_for_function("() => document.querySelectorAll('.person.selected .chip').length === 1")
            page.keyboard.press("/")
            page.keyboard.type("stand")
            page.keyboard.press("Enter")
            page.wait_for_function("() => document.querySelectorAll('.person.selected .chip').length === 2")
            assert chips(page, 1) == ["walk", "stand"]
            page.keyboard.press("Escape")
            # person 2 (j): "carry/hold" with the mouse
            page.keyboard.press("j")
            page.wait_for_selector(".person.selected[data-person='2']")
            page.click(".person.selected .picker label[data-action='17']")
            page.wait_for_function("() => document.getElementById('progress-text').textContent === '1 / 4 clips done'")
            assert actions.read_text() == HEADER + "dancer_000,r,1,14\ndancer_000,r,1,12\ndancer_000,r,2,17\n"

            # exclude the next clip with a reason (n, x, type, Enter)
            page.keyboard.press("n")
            page.wait_for_function("() => document.getElementById('clip-id').textContent === 'dancer_001'")
            page.keyboard.press("x")
            page.keyboard.type("camera shake")
            page.keyboard.press("Enter")
            page.wait_for_function("() => document.getElementById('progress-text').textContent === '2 / 4 clips done'")
            page.wait_for_function("() => document.getElementById('screen-status').textContent.startsWith('excluded')")
            assert last_line_becomes(screening, "dancer_001  # camera shake") == "dancer_001  # camera shake"
            assert page.locator(".person .picker .empty").inner_text().startswith("Clip excluded")

            # reload: the state comes back from the files
            page.reload()
            page.wait_for_function("() => document.getElementById('clip-id').textContent === 'dancer_001'")
            assert page.is_checked("#exclude") and page.input_value("#reason") == "camera shake"
            assert page.inner_text("#progress-text") == "2 / 4 clips done"
            page.keyboard.press("p")
            page.wait_for_function("() => document.getElementById('clip-id').textContent === 'dancer_000'")
            assert chips(page, 1) == ["walk", "stand"] and chips(page, 2) == ["carry/hold (an object)"]
            # only clips not done (u): the two done ones leave the list, the current one stays
            page.keyboard.press("u")  # the server filters the list (todo=1): it comes back a moment later
            page.wait_for_function("() => document.querySelectorAll('#clip-list div').length === 3")
            assert page.locator("#clip-list div").all_inner_texts() == ["dancer_000", "film_000", "film_001"]

            # a second tab sees the same state
            other = browser.new_page()
            other.goto(url + "#clip=dancer_000")
            other.wait_for_function("() => document.querySelectorAll('.person[data-person=\"1\"] .chip').length === 2")
            assert chips(other, 2) == ["carry/hold (an object)"]
            other.close()

            # a sixth action is refused: message shown, file unchanged
            for aid in (11, 7, 3):
                page.click(f".person.selected .picker label[data-action='{aid}']")
                box = f".person.selected .picker label[data-action='{aid}'] input:checked"
                page.wait_for_selector(box)
            before = actions.read_bytes()
            page.click(".person.selected .picker label[data-action='5']")
            page.wait_for_selector("#toast:not([hidden])")
            assert "already has 5 actions" in page.inner_text("#toast")
            assert actions.read_bytes() == before and len(chips(page, 1)) == 5
            assert errors == []
        finally:
            browser.close()

    # the files are what the workflow reads: the filter's screening, the export's labels
    assert read_screening(screening) == {"dancer_001"}
    inputs = unit_inputs(res)
    report = export.Report()
    clips = export.load_clips(inputs["manifests"], inputs["decisions"], report)
    boxes = export.keyframes(export.load_tracks(inputs["tracks"], clips, report), clips, report)
    from microg4m.formats import labels

    valid, problems, dups = export.validate_labels(labels.read_actions(actions), clips, boxes,
                                                   set(labels.read_label_map(LABEL_MAP)["id"]))
    assert problems.empty and dups == 0
    assert sorted(zip(valid["person_id"], valid["action_id"])) == [(1, 3), (1, 7), (1, 11), (1, 12), (1, 14), (2, 17)]
