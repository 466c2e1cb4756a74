"""Captions and QA pairs in team mode: versions per reviewer, agreement, adjudication, the
reviews file the workflow reads, the text agreement figures, and the refusals (each a
real HTTP request to the team app on the production server, with nothing written).

The results folder is the small one of test_annotate_store.py; the drafts are a drafts
file as the drafting stage writes it (test_vqa_draft.py runs the stage itself).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from microg4m.vqa import export as vqa_export
from microg4m.annotate.team import assign, text_agreement, vqa_review
from microg4m.annotate.team.db import CHANGES, FINAL, SCHEMA, connect
from microg4m.annotate.team.server import create_app
from microg4m.formats.results_index import ResultsIndex
from microg4m.vqa.rules import UNANSWERABLE, pair_warnings

from team_setup import Client, history_rows, make_project, serving
from test_annotate_store import unit_inputs
from test_vqa_review import RELEASED_SCHEMA

DRAFT_CAPTION = "A dancer in a black shirt stands in front of a blue wall and raises both arms."
DRAFT_PAIRS = [
    {"Q": "What colour is the wall?", "A": "Blue."},
    {"Q": "What does the dancer wear?", "A": "A black shirt."},
    {"Q": "What does the dancer do with the arms?", "A": "Raises both arms."},
    {"Q": "Where does the dancer stand?", "A": "In front of a blue wall."},
    {"Q": "What is the name of the dancer?", "A": UNANSWERABLE},
]


def write_drafts(results: Path) -> None:
    recs = [{"video_id": c, "status": "ok", "reason": "", "caption": DRAFT_CAPTION, "qa_pairs": DRAFT_PAIRS,
             "model": "stub/vlm", "prompt_hash": "0123456789abcdef", "time": "2026-01-01T00:00:00+00:00"}
            for c in ("dancer_000", "dancer_001")]
    index = ResultsIndex(results)
    drafts = index.files(index.unit_of("dancer")).vqa_drafts
    drafts.parent.mkdir(exist_ok=True)
    drafts.write_text(json.dumps({"clips": recs}))


def pairs(*edits) -> list[dict]:
    out = [dict(p) for p in DRAFT_PAIRS]
    for fn in edits:
        out = fn(out)
    return out


# ---------------------------------------------------------------- pure logic


def test_versions_agree_after_white_space_and_in_any_order():
    a = {"caption": "A dancer  stands.", "qa_pairs": pairs(), "reviewed": True}
    b = {"caption": " A dancer stands. ", "qa_pairs": list(reversed(pairs())), "reviewed": True}
    assert vqa_review.same(a, b)
    assert not vqa_review.same(a, {**b, "caption": "A Dancer stands."})  # case counts
    assert not vqa_review.same(a, {**b, "qa_pairs": pairs()[:4]})
    ct = vqa_review.ClipTexts(versions={"alice": a, "bob": b})
    assert vqa_review.status(ct, ["alice", "bob"]) == "agreed"
    assert vqa_review.status(ct, ["alice", "bob", "carol"]) == "pending"
    ct.versions["bob"] = {**b, "reviewed": False}
    assert vqa_review.status(ct, ["alice", "bob"]) == "pending"
    ct.versions["bob"] = {**b, "caption": "Someone else."}
    assert vqa_review.status(ct, ["alice", "bob"]) == "disagree"
    ct.resolved_by = "judy"
    assert vqa_review.status(ct, ["alice", "bob"]) == "resolved"


def test_word_diffs_edit_distances_and_pair_matching():
    assert text_agreement.word_diff("a black shirt stands", "a red shirt stands still") == [
        ["=", "a"], ["-", "black"], ["+", "red"], ["=", "shirt stands"], ["+", "still"]]
    assert text_agreement.word_distance("a black shirt stands", "a red shirt stands still") == 2
    assert text_agreement.word_distance(DRAFT_CAPTION, DRAFT_CAPTION) == 0
    version = [DRAFT_PAIRS[0],                                            # kept
               {"Q": "What does the dancer wear?", "A": "A black T-shirt."},  # same question: edited
               {"Q": "What does the dancer do with both arms?", "A": "Raises them."},  # similar question: edited
               {"Q": "Who watches the dancer?", "A": "Nobody."}]          # added
    rows, dropped = text_agreement.match_pairs(DRAFT_PAIRS, version)
    assert rows == [(0, 0, "kept"), (1, 1, "edited"), (2, 2, "edited"), (3, None, "added")]
    assert dropped == [3, 4]
    counts = text_agreement.pair_counts(DRAFT_PAIRS, version)
    assert counts == {"kept": 1, "edited": 2, "dropped": 2, "added": 1}
    assert text_agreement.shares(counts) == {"share_kept": 0.1667, "share_edited": 0.3333, "share_dropped": 0.3333,
                                             "share_added": 0.1667}
    d = text_agreement.text_diff({"caption": DRAFT_CAPTION, "qa_pairs": DRAFT_PAIRS},
                                 {"caption": DRAFT_CAPTION, "qa_pairs": version})
    assert [p["state"] for p in d["pairs"]] == ["kept", "edited", "edited", "added", "dropped", "dropped"]
    assert d["pairs"][1]["A"] == [["=", "A black"], ["-", "shirt."], ["+", "T-shirt."]]
    assert d["caption"] == [["=", DRAFT_CAPTION]] and d["caption_edit_words"] == 0


def test_text_figures_per_reviewer_and_question_types():
    drafts = {"c_000": {"status": "ok", "caption": DRAFT_CAPTION, "qa_pairs": DRAFT_PAIRS}}
    alice = {"caption": DRAFT_CAPTION, "qa_pairs": DRAFT_PAIRS[:4], "reviewed": True}  # dropped one pair
    bob = {"caption": DRAFT_CAPTION.replace("black", "dark"), "qa_pairs": DRAFT_PAIRS, "reviewed": True}
    final = {"caption": bob["caption"], "qa_pairs": DRAFT_PAIRS[:4], "by": "judy", "reviewers": ["alice", "bob"],
             "draft": None, "updated": "t"}
    texts = {"c_000": vqa_review.ClipTexts(versions={"alice": alice, "bob": bob}, final=final, resolved_by="judy"),
             "c_001": vqa_review.ClipTexts(versions={"alice": {**alice, "reviewed": False}})}
    fig = text_agreement.figures(texts, {"c_000": ["alice", "bob"], "c_001": ["alice", "bob"]}, drafts,
                                 ["alice", "bob"])
    v = fig["versions"].set_index("reviewer")
    assert len(fig["versions"]) == 2  # the unreviewed version of c_001 does not count
    assert v.loc["alice", ["caption_edit_words", "pairs_kept", "pairs_dropped", "changed_by_final"]].tolist() == [
        0, 4, 1, True]
    assert v.loc["bob", ["caption_edit_words", "pairs_kept", "pairs_dropped", "changed_by_final",
                         "to_final_edit_words"]].tolist() == [1, 5, 0, True, 0]
    r = fig["reviewers"].set_index("reviewer")
    assert r.loc["alice", ["reviewed", "with_final", "changed_by_final", "changed_share"]].tolist() == [1, 1, 1, 1.0]
    c = fig["clips"].set_index("clip_id")
    assert c.loc["c_000", ["status", "between_edit_words", "final_by", "changed_by_final"]].tolist() == [
        "resolved", 1.0, "judy", "alice,bob"]
    assert c.loc["c_001", "status"] == "pending"
    qt = fig["question_types"].set_index("question_type")
    assert qt.loc["what", ["draft", "alice", "bob", "final"]].tolist() == [4, 3, 4, 3]
    assert qt.loc["where", ["draft", "alice", "bob", "final"]].tolist() == [1, 1, 1, 1]
    s = fig["summary"]
    assert (s["clips_resolved"], s["clips_pending"], s["versions_changed_by_final"], s["clips_adjudicated"],
            s["clips_adjudicator_changed_every_version"]) == (1, 1, 2, 1, 1)


# ---------------------------------------------------------------- over HTTP


@pytest.fixture
def served(tmp_path):
    project = make_project(tmp_path, annotators=("alice", "bob", "carol"), k=2)
    write_drafts(Path(project.settings.results))
    with serving(create_app(project, {"127.0.0.1", "localhost"})) as port:
        users = {n: Client(port).login(n) for n in ("alice", "bob", "carol", "judy")}
        users["anon"] = Client(port)
        yield project, users


def reviewers_of(project, clip: str) -> list[str]:
    conn = project.connect()
    try:
        return assign.annotators_of(conn, clip)
    finally:
        conn.close()


def save(client, clip, caption=DRAFT_CAPTION, qa=None, reviewed=True, base=None):
    body = {"clip_id": clip, "caption": caption, "qa_pairs": pairs() if qa is None else qa, "reviewed": reviewed,
            "base": base, "from_draft": True}
    return client.post("/api/vqa", body)


def state(project) -> tuple:
    reviews = project.reviews.path
    return len(history_rows(project)), reviews.read_bytes() if reviews.is_file() else None


def test_questions_about_sound_or_intent_are_flagged_as_in_single_user_mode(served):
    project, users = served
    a, _ = reviewers_of(project, "dancer_000")
    qa = pairs(lambda p: p[:2] + [{"Q": "What does the dancer say?", "A": "Not mentioned"},
                                  {"Q": "Why does the dancer want to raise the arms?", "A": "To stretch."}])
    want = [{"pair": 3, "warnings": ["sound"]}, {"pair": 4, "warnings": ["intent"]}]
    status, out, _ = save(users[a], "dancer_000", qa=qa, reviewed=False)
    assert status == 200 and out["warnings"] == want == pair_warnings(qa)
    assert users[a].request("GET", "/api/vqa/dancer_000")[1]["warnings"] == want
    judy = users["judy"].request("GET", "/api/text-adjudication/dancer_000")[1]
    assert [v["warnings"] for v in judy["versions"] if v["reviewer"] == a] == [want]


def test_reviewers_start_from_the_draft_and_agreeing_versions_become_final_at_once(served):
    project, users = served
    a, b = reviewers_of(project, "dancer_000")
    ra, rb = users[a], users[b]
    got = ra.request("GET", "/api/vqa/dancer_000")[1]
    assert got["entry"] is None and got["draft"]["caption"] == DRAFT_CAPTION  # pre-filled from the draft
    assert ra.request("GET", "/api/vqa")[1]["clips"]["dancer_000"] == {"edited": False, "reviewed": False,
                                                                      "draft": "ok"}
    # a's version, not yet reviewed: stored in a's layer with who/when/before/after
    status, out, _ = save(ra, "dancer_000", reviewed=False)
    assert status == 200 and out["change"] == 1 and "status" not in out  # blind: no word of the co-reviewer
    row = [r for r in history_rows(project) if r["layer"] == a][0]
    assert (row["who"], row["layer"], row["kind"], row["clip_id"], row["before"]) == (a, a, "text", "dancer_000", None)
    after = json.loads(row["after"])
    assert after["caption"] == DRAFT_CAPTION and after["draft"]["model"] == "stub/vlm" and not after["reviewed"]
    assert not project.reviews.path.exists()  # no final text yet, no file
    # both reviewed, the same text up to white space and pair order: final at once (@auto)
    base = out["entry"]["updated"]
    status, out, _ = save(ra, "dancer_000", base=base)
    assert status == 200 and out["change"] == 2
    status, out, _ = save(rb, "dancer_000", caption="  " + DRAFT_CAPTION.replace(" ", "  "),
                          qa=list(reversed(pairs())))
    assert status == 200 and out["change"] == 1 and set(out) == {"clip_id", "entry", "warnings", "change"}
    last = history_rows(project)[-1]  # b's version made the text final at once
    assert (last["who"], last["layer"], last["kind"]) == ("@auto", FINAL, "text")
    doc = json.loads(project.reviews.path.read_text())
    entry = doc["clips"]["dancer_000"]
    assert (entry["caption"], entry["qa_pairs"], entry["reviewed"], entry["reviewer"], entry["reviewers"]) == (
        DRAFT_CAPTION, pairs(), True, "@auto", sorted([a, b]))
    assert entry["draft"] == {"model": "stub/vlm", "prompt_hash": "0123456789abcdef",
                              "time": "2026-01-01T00:00:00+00:00"}
    # the export reads exactly the final text, in the released schema
    res = Path(project.settings.results)
    out_dir = res.parent / "vqa"
    inputs = unit_inputs(res)
    summary = vqa_export.run(manifests=inputs["manifests"], decisions=inputs["decisions"], reviews=project.reviews.path,
                             out_dir=out_dir)
    exported = json.loads((out_dir / "vqa_and_captioning.json").read_text())
    jsonschema.validate(exported, RELEASED_SCHEMA)
    assert summary["exported"] == 1 and exported == [{"video_id": "dancer_000", "caption": DRAFT_CAPTION,
                                                      "qa_pairs": pairs()}]
    # b changes their mind: the final text is withdrawn (@auto), the file follows
    status, out, _ = save(rb, "dancer_000", caption=DRAFT_CAPTION + " She smiles.",
                          base=users[b].request("GET", "/api/vqa/dancer_000")[1]["entry"]["updated"])
    assert status == 200 and "status" not in out
    assert json.loads(project.reviews.path.read_text())["clips"] == {}
    assert users["judy"].request("GET", "/api/text-adjudication")[1]["counts"]["disagree"] == 1  # the adjudicator sees it
    conn = project.connect()
    assert project.rebuild(conn, check=True)["differ"] == []
    conn.close()


def test_the_adjudicator_sees_diffs_merges_and_the_final_stays(served):
    project, users = served
    a, b = reviewers_of(project, "dancer_001")
    drop_last = lambda ps: ps[:-1]  # noqa: E731
    save(users[a], "dancer_001", caption=DRAFT_CAPTION.replace("black", "dark"), qa=pairs(drop_last))
    extra = {"Q": "How many people are in the clip?", "A": "One."}
    save(users[b], "dancer_001", qa=pairs(lambda ps: ps + [extra]))
    judy = users["judy"]
    listing = judy.request("GET", "/api/text-adjudication")[1]
    assert {c["clip_id"]: c["status"] for c in listing["clips"]}["dancer_001"] == "disagree"
    assert listing["counts"]["disagree"] == 1
    d = judy.request("GET", "/api/text-adjudication/dancer_001")[1]
    va = next(v for v in d["versions"] if v["reviewer"] == a)
    assert va["diffs"]["draft"]["caption"] == [["=", "A dancer in a"], ["-", "black"], ["+", "dark"],
                                               ["=", "shirt stands in front of a blue wall and raises both arms."]]
    assert va["diffs"]["draft"]["counts"] == {"kept": 4, "edited": 0, "dropped": 1, "added": 0}
    assert va["diffs"][b]["counts"] == {"kept": 4, "edited": 0, "dropped": 2, "added": 0}  # against b's version
    assert d["width"] == 320 and d["frames"] == 90 and d["boxes"]  # the clip's frames are shown with it
    merged = {"clip_id": "dancer_001", "caption": va["caption"], "qa_pairs": va["qa_pairs"] + [extra],
              "note": "a's caption, b's extra question"}
    status, out, _ = judy.post("/api/text-final", merged)
    assert status == 200 and out["status"] == "resolved" and out["final"]["by"] == "judy"
    entry = json.loads(project.reviews.path.read_text())["clips"]["dancer_001"]
    assert (entry["caption"], entry["qa_pairs"], entry["reviewer"], entry["note"]) == (
        merged["caption"], merged["qa_pairs"], "judy", merged["note"])
    # the reviewers change their versions later: the adjudicated text stays
    before = project.reviews.path.read_bytes()
    base = users[a].request("GET", "/api/vqa/dancer_001")[1]["entry"]["updated"]
    assert save(users[a], "dancer_001", caption="Something else entirely.", base=base)[0] == 200
    assert project.reviews.path.read_bytes() == before
    # the figures: on the page and in the report
    fig = judy.request("GET", "/api/text-adjudication")[1]["figures"]
    rev = {r["reviewer"]: r for r in fig["reviewers"]}
    assert rev[b]["changed_by_final"] == 1 and rev[b]["pairs_added"] == 1
    written = judy.post("/api/report", {})[1]["written"]
    report = Path(project.settings.report_dir)
    assert str(report / "text_agreement_reviewers.tsv") in written
    clips = pd.read_csv(report / "text_agreement_clips.tsv", sep="\t").set_index("clip_id")
    assert clips.loc["dancer_001", "final_by"] == "judy" and clips.loc["dancer_001", "status"] == "resolved"
    notes = [r for r in history_rows(project) if r["kind"] == "text_note"]
    assert [(r["who"], r["after"]) for r in notes] == [("judy", json.dumps(merged["note"]))]


def test_rebuild_gives_the_reviews_file_byte_for_byte_and_keeps_a_hand_edit_aside(served):
    project, users = served
    for clip in ("dancer_000", "film_000"):
        for r in reviewers_of(project, clip):
            assert save(users[r], clip)[0] == 200
    good = project.reviews.path.read_bytes()
    assert sorted(json.loads(good)["clips"]) == ["dancer_000", "film_000"]
    conn = project.connect()
    project.reviews.path.write_text(good.decode().replace("black shirt", "blue shirt"))
    assert project.rebuild(conn, check=True)["differ"] == [str(project.reviews.path)]
    out = project.rebuild(conn)
    assert str(project.reviews.path) in out["written"] and project.reviews.path.read_bytes() == good
    baks = list(project.reviews.path.parent.glob("vqa_reviews.json.*.bak"))
    assert len(baks) == 1 and "blue shirt" in baks[0].read_text()
    conn.close()


MINE, OTHER = "{mine}", "{other}"
SEVEN = [{"Q": f"What is item {i}?", "A": f"Item {i}."} for i in range(7)]
TWO_UNANSWERABLE = [{"Q": "What is the name of the dancer?", "A": UNANSWERABLE},
                    {"Q": "What is the age of the dancer?", "A": UNANSWERABLE}]
CASES = [
    ("anon", "/api/vqa", {"clip_id": MINE}, True, 401, "not logged in"),
    ("alice", "/api/vqa", {"clip_id": MINE}, None, 403, "missing CSRF token"),
    ("alice", "/api/vqa", {"clip_id": MINE}, "forged", 403, "does not match this session"),
    ("alice", "/api/vqa", {"clip_id": OTHER}, True, 403, f"clip {OTHER} is not in alice's queue"),
    ("alice", "/api/vqa", {"clip_id": MINE, "annotator": "bob"}, True, 403, "only their own labels, not those of 'bob'"),
    ("alice", "/api/vqa", {"clip_id": MINE, "qa_pairs": SEVEN}, True, 422, "7 QA pairs: at most 6 per clip"),
    ("alice", "/api/vqa", {"clip_id": MINE, "qa_pairs": TWO_UNANSWERABLE}, True, 422,
     "2 unanswerable pairs (answer 'Not mentioned'): at most one per clip"),
    ("alice", "/api/vqa", {"clip_id": MINE, "qa_pairs": [{"Q": "Who?", "A": "not mentioned."}]}, True, 422,
     "exactly 'Not mentioned'"),
    ("alice", "/api/vqa", {"clip_id": MINE, "caption": " "}, True, 422, "marked reviewed without a caption"),
    ("alice", "/api/vqa", {"clip_id": MINE, "base": "2020-01-01T00:00:00+00:00"}, True, 409, "after this page loaded it"),
    ("alice", "/api/vqa", {"clip_id": "../../etc/passwd"}, True, 404, "unknown clip"),
    ("judy", "/api/vqa", {"clip_id": MINE}, True, 403, "is for annotators"),
    ("alice", "/api/text-final", {"clip_id": MINE}, True, 403, "is for adjudicators"),
    ("judy", "/api/text-final", {"clip_id": MINE}, None, 403, "missing CSRF token"),
    ("judy", "/api/text-final", {"clip_id": MINE, "qa_pairs": SEVEN}, True, 422, "at most 6 per clip"),
    ("judy", "/api/text-final", {"clip_id": MINE, "qa_pairs": TWO_UNANSWERABLE}, True, 422, "at most one per clip"),
    ("judy", "/api/text-final", {"clip_id": MINE, "caption": ""}, True, 422, "needs a caption"),
    ("judy", "/api/text-final", {"clip_id": MINE, "note": "x" * 1001}, True, 422, "note is 1001 characters"),
]


@pytest.mark.parametrize("who, path, data, csrf, status, message", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[4]}-{i}" for i, c in enumerate(CASES)])
def test_refused_and_nothing_written(served, who, path, data, csrf, status, message):
    project, users = served
    conn = project.connect()
    mine = assign.queue(conn, "alice")[0]
    other = sorted(set(project.assigned(conn)) - set(assign.queue(conn, "alice")))[0]
    conn.close()
    # one stored version first, so that a refusal has something to leave alone
    assert save(users["alice"], mine, reviewed=False)[0] == 200
    fill = lambda x: x.replace(MINE, mine).replace(OTHER, other) if isinstance(x, str) else x  # noqa: E731
    body = {"caption": DRAFT_CAPTION, "qa_pairs": pairs(), "reviewed": True, "note": "",
            "base": users["alice"].request("GET", f"/api/vqa/{mine}")[1]["entry"]["updated"],
            **{k: fill(v) for k, v in data.items()}}
    token = True if csrf is True else csrf
    before = state(project)
    got, payload, _ = users[who].post(path, body, csrf=token)
    assert got == status, (got, payload)
    assert fill(message) in payload["error"], payload
    assert state(project) == before


def test_a_version_database_is_migrated_and_existing_reviews_are_imported(tmp_path):
    """A schema-1 database (before captions) keeps every row; reviewed entries of an
    existing reviews file become final texts by @import, the unreviewed ones stay in the .bak."""
    ann = tmp_path / "annotations"
    ann.mkdir()
    v1 = ann / "team.sqlite"
    old = sqlite3.connect(v1)
    old_changes = CHANGES.replace(",\n                                       'text', 'text_note', 'text_resolved'", "")
    assert old_changes != CHANGES
    old.executescript(SCHEMA.replace(CHANGES, old_changes))
    old.execute("INSERT INTO meta VALUES ('schema', '1')")
    old.execute("INSERT INTO changes (at, who, layer, kind, clip_id, clip_type, person_id, before, after) "
                "VALUES ('t', 'alice', 'alice', 'actions', 'dancer_000', 'r', 1, NULL, '[12]')")
    old.execute("INSERT INTO current VALUES ('alice', 'actions', 'dancer_000', 1, 'r', '[12]', 1)")
    with pytest.raises(sqlite3.IntegrityError):
        old.execute("INSERT INTO changes (at, who, layer, kind, clip_id, clip_type, person_id, before, after) "
                    "VALUES ('t', 'alice', 'alice', 'text', 'dancer_000', 'r', 0, NULL, '{}')")
    old.commit()
    old.close()
    (ann / "vqa_reviews.json").write_text(json.dumps({"version": 1, "clips": {
        "dancer_000": {"caption": "A person waves.", "qa_pairs": pairs(), "reviewed": True, "reviewer": "ann",
                       "updated": "2026-01-02T00:00:00Z", "draft": None},
        "film_000": {"caption": "Half done.", "qa_pairs": [], "reviewed": False}}}))
    project = make_project(tmp_path)
    conn = connect(v1)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == "3"  # migrated to today's schema
    rows = history_rows(project)
    assert (rows[0]["who"], rows[0]["kind"], rows[0]["after"]) == ("alice", "actions", "[12]")  # kept
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM changes WHERE seq = 1")
    final = vqa_review.read_clip(conn, "dancer_000")
    assert final.final["caption"] == "A person waves." and final.resolved_by == "@import"
    assert final.final["updated"] == "2026-01-02T00:00:00Z"
    entries = json.loads(project.reviews.path.read_text())["clips"]
    assert list(entries) == ["dancer_000"] and entries["dancer_000"]["reviewer"] == "@import"
    bak = next(ann.glob("vqa_reviews.json.*.bak"))
    assert "Half done." in bak.read_text()
    assert project.rebuild(conn, check=True)["differ"] == []
    conn.close()


def test_the_server_settings_match_the_schema_and_the_config():
    import yaml

    from microg4m.annotate.serving import ServerSettings

    repo = Path(__file__).resolve().parents[1]
    schema = yaml.safe_load((repo / "microg4m" / "schemas" / "config.schema.yaml").read_text())
    server = schema["properties"]["team"]["properties"]["server"]["properties"]
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())["team"]["server"]
    defaults = {k: v["default"] for k, v in server.items()}
    assert defaults == config == {k: getattr(ServerSettings(), k) for k in defaults}
    with pytest.raises(ValueError, match="team.server.threads = 0"):
        ServerSettings(threads=0).check()
