"""The clip lists come a page at a time (annotate/pages.py): the page chosen by ``page``,
``around`` and the first clip still to do, the filters (``todo=1``, ``status=``) that keep
the clip open, refusals of a bad page number; over HTTP on the single-user and team
servers, and in Chromium, where ``n`` and ``p`` step across pages. The page size is
made small (monkeypatched) so that a few clips make several pages."""

from __future__ import annotations

import pytest

from microg4m.annotate import pages
from microg4m.annotate.errors import Refused
from microg4m.annotate.pages import Listing, page, status_page, todo_page
from microg4m.annotate.team.server import create_app as team_app

from team_setup import Client, make_project, serving
from test_annotate_store import clip_video, make_app, token_client  # noqa: F401  (fixture)


def listing(done: list[bool]) -> Listing:
    ids = [f"c{i}" for i in range(len(done))]
    return Listing(ids, [f'"{c}"' for c in ids], list(done))


def shown(text: str) -> list[str]:
    return [c.strip('"') for c in text[1:-1].split(",") if c]


def test_the_page_is_chosen_by_page_around_and_the_first_clip_to_do(monkeypatch):
    monkeypatch.setattr(pages, "PAGE", 3)
    lst = listing([True, True, True, True, False, True, False])  # c4 and c6 not done
    text, where = todo_page(lst, {})  # opens on the first not done
    assert shown(text) == ["c3", "c4", "c5"] and where == {"page": 2, "pages": 3, "listed": 7, "page_size": 3}
    assert shown(todo_page(lst, {"page": "1"})[0]) == ["c0", "c1", "c2"]
    assert shown(todo_page(lst, {"page": "99"})[0]) == ["c6"]  # past the last: the last
    assert shown(todo_page(lst, {"around": "c1"})[0]) == ["c0", "c1", "c2"]
    assert shown(todo_page(lst, {"around": "gone"})[0]) == ["c3", "c4", "c5"]  # not listed: as without it
    # todo=1 keeps the clips not done, and the clip open even when done
    text, where = todo_page(lst, {"todo": "1", "around": "c2"})
    assert shown(text) == ["c2", "c4", "c6"] and where["listed"] == 3
    assert shown(todo_page(lst, {"todo": "1"})[0]) == ["c4", "c6"]
    for bad in ("0", "-2", "two", "1.5", ""):
        with pytest.raises(Refused) as exc:
            page(lst, {"page": bad})
        assert exc.value.status == 400 and "page must be a whole number" in exc.value.message
    # an entry changed in place is seen by the next page
    lst.set(6, '"c6"', True)
    assert shown(todo_page(lst, {"todo": "1"})[0]) == ["c4"]
    statuses = Listing(["a", "b", "c", "d"], ['"a"', '"b"', '"c"', '"d"'], ["agreed", "disagree", "resolved", "disagree"])
    assert shown(status_page(statuses, {"status": "disagree"})[0]) == ["b", "d"]
    assert shown(status_page(statuses, {"status": "disagree", "around": "c"})[0]) == ["b", "c", "d"]
    assert status_page(statuses, {})[1]["page"] == 1 and shown(status_page(statuses, {"status": "all"})[0]) == \
        ["a", "b", "c"]


def test_single_user_state_comes_a_page_at_a_time(tmp_path, clip_video, monkeypatch):  # noqa: F811
    monkeypatch.setattr(pages, "PAGE", 3)
    app, _, _ = make_app(tmp_path, clip_video, "ann1")
    client = token_client(app)

    def state(query: str = "") -> dict:
        r = client.get(f"/api/state{query}")
        assert r.status_code == 200, r.get_json()
        return r.get_json()

    first = state()
    ids = [c["clip_id"] for c in first["clips"]]
    assert (first["page"], first["pages"], first["listed"], first["total"]) == (1, 2, 4, 4)
    assert ids == ["dancer_000", "dancer_001", "film_000"]
    second = state("?page=2")
    assert [c["clip_id"] for c in second["clips"]] == ["film_001"]
    last = second["clips"][0]["clip_id"]
    assert state(f"?around={last}")["page"] == 2
    # the first clip done: todo=1 leaves it out (unless it is the one open)
    assert client.post("/api/screening", json={"clip_id": ids[0], "excluded": True, "reason": "blurry"}).status_code == 200
    todo = state("?todo=1")
    assert (todo["listed"], todo["pages"], todo["done"]) == (3, 1, 1) and ids[0] not in \
        [c["clip_id"] for c in todo["clips"]]
    assert ids[0] in [c["clip_id"] for c in state(f"?todo=1&around={ids[0]}")["clips"]]
    r = client.get("/api/state?page=-2")
    assert r.status_code == 400 and "page must be a whole number" in r.get_json()["error"]


def test_team_lists_come_a_page_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(pages, "PAGE", 1)
    project = make_project(tmp_path)
    with serving(team_app(project, {"127.0.0.1"})) as port:
        alice, bob = Client(port).login("alice"), Client(port).login("bob")
        status, state, _ = alice.request("GET", "/api/state")
        assert status == 200 and state["pages"] == state["listed"] == state["total"] >= 2
        queue = [alice.request("GET", f"/api/state?page={n}")[1]["clips"][0]["clip_id"]
                 for n in range(1, state["pages"] + 1)]
        assert len(set(queue)) == len(queue)
        # the annotators disagree on the second clip of the queue: the adjudicator's list,
        # filtered by status, holds it alone
        clip = queue[1]
        _, detail, _ = alice.request("GET", f"/api/clips/{clip}")
        for who, action in ((alice, 12), (bob, 14)):
            for p in detail["persons"]:
                assert who.post("/api/actions", {"clip_id": clip, "person_id": p, "action": action, "op": "add"})[0] \
                    == 200
        judy = Client(port).login("judy")
        status, listed, _ = judy.request("GET", "/api/adjudication?status=disagree")
        assert status == 200 and [c["clip_id"] for c in listed["clips"]] == [clip] and listed["listed"] == 1
        _, every, _ = judy.request("GET", "/api/adjudication")  # opens on the first that disagrees
        assert every["clips"][0]["clip_id"] == clip and every["listed"] == len(queue)
        assert judy.request("GET", "/api/adjudication?status=agreed")[1]["listed"] == 0
        status, err, _ = judy.request("GET", "/api/adjudication?page=-2")
        assert status == 400 and "page must be a whole number" in err["error"]
        status, texts, _ = judy.request("GET", "/api/text-adjudication?status=all&page=2")
        assert status == 200 and texts["page"] == 2 and len(texts["clips"]) == 1


def test_the_page_steps_across_pages_in_chromium(tmp_path, clip_video, monkeypatch):  # noqa: F811
    """n and p cross to the next and previous page; the pager's buttons turn pages; a link
    to a clip (#clip=...) opens the page that holds it."""
    playwright = pytest.importorskip("playwright.sync_api")
    from browser import ARGS, CHROMIUM

    monkeypatch.setattr(pages, "PAGE", 2)
    app, _, _ = make_app(tmp_path, clip_video)
    with serving(app) as port, playwright.sync_playwright() as p:
        url = f"http://127.0.0.1:{port}/?token={app.config['ACCESS_TOKEN']}"
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))

            def at(clip: str, pager: str, listed: list[str]) -> None:
                page.wait_for_function(f"() => document.getElementById('clip-id').textContent === '{clip}' && "
                                       f"document.getElementById('pager').textContent.includes('{pager}')")
                assert page.locator("#clip-list div").all_inner_texts() == listed

            page.goto(url)
            at("dancer_000", "page 1 / 2 (4 clips)", ["dancer_000", "dancer_001"])
            page.keyboard.press("n")
            at("dancer_001", "page 1 / 2", ["dancer_000", "dancer_001"])
            page.keyboard.press("n")  # the last of the page: the next page's first
            at("film_000", "page 2 / 2", ["film_000", "film_001"])
            page.keyboard.press("p")
            at("dancer_001", "page 1 / 2", ["dancer_000", "dancer_001"])
            page.click("#pager button[title='the page after']")  # turns the page; the clip open stays
            page.wait_for_function("() => document.getElementById('pager').textContent.includes('page 2 / 2')")
            assert page.locator("#clip-list div").all_inner_texts() == ["film_000", "film_001"]
            assert page.inner_text("#clip-id") == "dancer_001"
            other = browser.new_page()
            other.goto(url + "#clip=film_001")
            other.wait_for_function("() => document.getElementById('clip-id').textContent === 'film_001' && "
                                    "document.getElementById('pager').textContent.includes('page 2 / 2')")
            other.close()
            assert errors == []
        finally:
            browser.close()
