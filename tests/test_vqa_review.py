"""Captions and QA pairs: the rules (six pairs, one "Not mentioned"), the refinement and
ranking of a model's candidates, the review API of the annotation page (real Flask app,
real files) and the export against the released sample's schema and bytes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from microg4m.vqa import rules as vqa, export as vqa_export
from microg4m.formats.manifest import write_manifest
from microg4m.formats.results_index import ResultsIndex
from microg4m.vqa.rules import MAX_PAIRS, UNANSWERABLE, VQAError
from microg4m.vqa.rank import MalformedReply, parse_candidates, refine
from test_annotate_store import clip_video, make_app, token_client  # noqa: F401  (fixture)
from vlm_stub import CANDIDATES, CAPTION

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO.parent.parent / "shared" / "reference" / "microg4m" / "dataset" / "vqa_and_captioning" / \
    "vqa_and_captioning.json"
if not SAMPLE.is_file():  # a checkout beside shared/ (CI), or a worktree two levels below it
    SAMPLE = REPO.parent / "shared" / "reference" / "microg4m" / "dataset" / "vqa_and_captioning" / \
        "vqa_and_captioning.json"
# the released file's schema, as the sample shows it
RELEASED_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object", "additionalProperties": False, "required": ["video_id", "caption", "qa_pairs"],
        "properties": {
            "video_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]+_[0-9]{3}$"},
            "caption": {"type": "string", "minLength": 1},
            "qa_pairs": {"type": "array", "maxItems": 6, "items": {
                "type": "object", "additionalProperties": False, "required": ["Q", "A"],
                "properties": {"Q": {"type": "string", "minLength": 1}, "A": {"type": "string", "minLength": 1}}}},
        },
    },
}


def pairs(n: int, unanswerable: int = 0) -> list[dict]:
    out = [{"Q": f"What is item {i}?", "A": f"Item {i}."} for i in range(n - unanswerable)]
    return out + [{"Q": f"What colour is hidden thing {i}?", "A": UNANSWERABLE} for i in range(unanswerable)]


# ---------------------------------------------------------------- rules


def test_six_pairs_and_one_not_mentioned_pass_and_text_is_kept_on_one_line():
    got = vqa.check_pairs([{"Q": "  Who is\nthere? ", "A": "An  astronaut."}] + pairs(5, 1))
    assert len(got) == MAX_PAIRS and got[0] == {"Q": "Who is there?", "A": "An astronaut."}
    assert vqa.check_caption(" A  person\n floats. ") == "A person floats."


@pytest.mark.parametrize("bad, message", [
    (pairs(7), "7 QA pairs: at most 6 per clip"),
    (pairs(3, 2), "2 unanswerable pairs"),
    ([{"Q": "Who is there?", "A": "not mentioned."}], "exactly 'Not mentioned', got 'not mentioned.'"),
    ([{"Q": "Who is there?", "A": "Not Mentioned"}], "exactly 'Not mentioned'"),
    ([{"Q": "Who is there?"}], "exactly the keys Q and A"),
    ([{"Q": "Who?", "A": "Me.", "score": 1}], "exactly the keys Q and A"),
    ([{"Q": " ", "A": "Me."}], "pair 1: Q must be a non-empty string"),
    ([{"Q": "Who?", "A": 3}], "pair 1: A must be a non-empty string"),
    ([{"Q": "Who is there?", "A": "A."}, {"Q": "who is  there?", "A": "B."}], "pair 2 repeats the question of pair 1"),
    ({"Q": "Who?", "A": "Me."}, "must be a list"),
])
def test_broken_rules_are_refused_with_the_reason(bad, message):
    with pytest.raises(VQAError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        vqa.check_pairs(bad)


def test_warnings_and_question_types():
    assert vqa.warnings_for("What sound does the airlock make?") == ["sound"]
    assert vqa.warnings_for("What does she say to the camera?") == ["sound"]
    assert vqa.warnings_for("Why does he want to leave?") == ["intent"]
    assert vqa.warnings_for("How does the food taste?") == ["not visible"]
    assert vqa.warnings_for("What happens off-camera before the video?") == ["not visible"]
    assert vqa.warnings_for("How does she hold her arms while speaking to the camera?") == []
    assert vqa.warnings_for("What rings are on the module?") == []
    types = [vqa.question_type(q) for q in ("What is it?", "In which module is she?", "Is she floating?",
                                            "Name the module.", "How many crew members are there?")]
    assert types == ["what", "which", "yes/no", "other", "how"]


def test_refinement_drops_sound_intent_repeats_keeps_six_and_one_unanswerable():
    kept, log = refine(CANDIDATES, CAPTION)
    assert len(kept) == MAX_PAIRS and sum(p["A"] == UNANSWERABLE for p in kept) == 1
    assert vqa.check_pairs(kept) == kept  # the drafts obey the page's rules
    reasons = [c["reason"] for c in log if c["status"] == "dropped"]
    assert "about sound (not visible)" in reasons and "about intent (not visible)" in reasons
    assert "repeats an earlier question" in reasons
    assert refine(CANDIDATES, CAPTION) == (kept, log)  # deterministic
    kept3, _ = refine(CANDIDATES, CAPTION, keep=3, unanswerable=False)
    assert len(kept3) == 3 and UNANSWERABLE not in [p["A"] for p in kept3]
    first = [c for c in log if c.get("rank") == 1][0]
    assert first["score"] == max(c.get("score", 0) for c in log)  # the best scored goes first
    # the ranking's parts: an answer that the caption does not support scores lower
    good, bad = refine([{"Q": "What does the astronaut reach for?", "A": "A silver camera."},
                        {"Q": "What does the astronaut carry?", "A": "A red hammer."}], CAPTION)[1]
    assert (good["consistency"], bad["consistency"]) == (1.0, 0.0) and good["rank"] == 1 and bad["rank"] == 2


def test_candidates_are_parsed_from_fences_objects_and_other_key_names():
    assert parse_candidates('```json\n[{"Q": "Who?", "A": "Me."}]\n```') == [{"Q": "Who?", "A": "Me."}]
    assert parse_candidates('Here: {"qa_pairs": [{"question": "Who?", "answer": "Me."}]}') == [
        {"Q": "Who?", "A": "Me."}]
    for bad in ("", "no json here", '[{"q": 1}]', "[1, 2, 3]"):
        with pytest.raises(MalformedReply):
            parse_candidates(bad)


# ---------------------------------------------------------------- the page's API


@pytest.fixture
def api(tmp_path, clip_video):  # noqa: F811
    app, res, ann = make_app(tmp_path, clip_video, "alice")
    return token_client(app), res, ann / "vqa_reviews.json"


def save(c, clip="dancer_000", base=None, **body):
    doc = {"clip_id": clip, "caption": "A person stands in front of a blue wall.", "qa_pairs": pairs(2),
           "reviewed": True, "base": base, **body}
    return c.post("/api/vqa", json=doc)


def write_drafts(res: Path, caption: str, time: str, unit: str | None = None) -> None:
    """The drafts of dancer_000, in the drafts file of its unit (or of ``unit``)."""
    rec = {"video_id": "dancer_000", "status": "ok", "reason": "", "caption": caption, "qa_pairs": pairs(6, 1),
           "model": "m", "prompt_hash": "abc", "time": time}
    index = ResultsIndex(res)
    path = index.files(unit or index.clip("dancer_000").unit).vqa_drafts
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"clips": [rec]}))


def test_save_reload_and_the_rules_on_the_server(api):
    c, res, reviews = api
    assert c.get("/api/vqa/dancer_000").get_json() == {"clip_id": "dancer_000", "entry": None, "draft": None,
                                                         "warnings": []}
    r = save(c, qa_pairs=pairs(5, 1) + [{"Q": "What does the dancer hear?", "A": "Music."}])
    assert r.status_code == 200, r.get_json()
    entry = r.get_json()["entry"]
    assert r.get_json()["warnings"] == [{"pair": 6, "warnings": ["sound"]}]  # a warning, not a refusal
    assert entry["reviewed"] is True and entry["reviewer"] == "alice" and entry["draft"] is None
    on_disk = json.loads(reviews.read_text())
    assert on_disk["version"] == 1 and on_disk["clips"]["dancer_000"] == entry
    assert c.get("/api/vqa/dancer_000").get_json()["entry"] == entry
    assert c.get("/api/vqa").get_json()["clips"] == {"dancer_000": {"edited": True, "reviewed": True, "draft": None}}
    before = reviews.read_bytes()
    refusals = [
        (save(c, base=entry["updated"], qa_pairs=pairs(7)), 422, "at most 6 per clip"),
        (save(c, base=entry["updated"], qa_pairs=pairs(4, 2)), 422, "at most one per clip"),
        (save(c, base=entry["updated"], qa_pairs=[{"Q": "Who?", "A": "not mentioned"}]), 422, "exactly 'Not mentioned'"),
        (save(c, base=entry["updated"], caption=" "), 422, "reviewed without a caption"),
        (save(c, base=entry["updated"], reviewed="yes"), 400, "reviewed must be true or false"),
        (save(c, base=None), 409, "was saved by alice at"),  # a page that loaded it before the save
        (save(c, clip="dancer_002", base=None), 404, "unknown clip 'dancer_002'"),  # rejected by the filter
        (c.post("/api/vqa", data="caption=x"), 400, "expected a JSON object"),
    ]
    for resp, status, message in refusals:
        assert resp.status_code == status and message in resp.get_json()["error"], resp.get_json()
    assert reviews.read_bytes() == before  # nothing written
    r = save(c, base=entry["updated"], reviewed=False, caption="")  # not reviewed: an empty caption is fine
    assert r.status_code == 200 and json.loads(reviews.read_text())["clips"]["dancer_000"]["reviewed"] is False
    assert list(reviews.parent.glob(".*")) == []  # no temporary file left


def test_a_draft_never_overwrites_a_persons_edit(api):
    c, res, reviews = api
    write_drafts(res, "A stale draft.", "2025-01-01T00:00:00Z", unit="dancer")  # of an earlier plan: not read
    assert c.get("/api/vqa/dancer_000").get_json()["draft"] is None
    write_drafts(res, "A draft caption from the model.", "2026-01-01T00:00:00Z")
    got = c.get("/api/vqa/dancer_000").get_json()
    assert got["entry"] is None and got["draft"]["caption"] == "A draft caption from the model."
    assert got["warnings"] == []
    assert c.get("/api/vqa").get_json()["clips"]["dancer_000"] == {"edited": False, "reviewed": False, "draft": "ok"}
    r = save(c, caption="The person's caption.", from_draft=True)
    assert r.get_json()["entry"]["draft"] == {"model": "m", "prompt_hash": "abc", "time": "2026-01-01T00:00:00Z"}
    before = reviews.read_bytes()
    write_drafts(res, "A newer draft.", "2026-02-02T00:00:00Z")  # the workflow drafts again
    got = c.get("/api/vqa/dancer_000").get_json()
    assert got["entry"]["caption"] == "The person's caption." and got["draft"]["caption"] == "A newer draft."
    assert reviews.read_bytes() == before


def test_concurrent_saves_lose_nothing(api):
    c, res, reviews = api
    clips = ["dancer_000", "dancer_001", "film_000", "film_001"]
    results = {}

    def one(cid):
        results[cid] = save(c, clip=cid, caption=f"Caption of {cid}.").status_code

    threads = [threading.Thread(target=one, args=(cid,)) for cid in clips]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == dict.fromkeys(clips, 200)
    got = json.loads(reviews.read_text())["clips"]
    assert {k: v["caption"] for k, v in got.items()} == {cid: f"Caption of {cid}." for cid in clips}


def test_a_broken_reviews_file_stops_the_page_at_start(tmp_path, clip_video):  # noqa: F811
    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "vqa_reviews.json").write_text('{"clips": [1, 2]}')
    with pytest.raises(ValueError, match=r"vqa_reviews.json: expected .*fix it by hand"):
        make_app(tmp_path, clip_video)


# ---------------------------------------------------------------- export


def released_run(root: Path, records: list[dict]) -> dict:
    """A results folder whose kept clips are the sample's, a reviews file with the sample
    reviewed (plus an unreviewed and a broken entry), then the export."""
    src = records[0]["video_id"].rsplit("_", 1)[0]
    ids = [f"{src}_{i:03d}" for i in range(2, 7)]  # _002 rejected; _006 kept, not reviewed
    write_manifest(root / "clips" / src / "manifest.tsv", [
        dict(clip_id=c, source_id=src, clip_type="r", seq=int(c[-3:]), start_s=3 * int(c[-3:]), frames=90,
             width=640, height=360, status="ok", reason="") for c in ids])
    (root / "filter").mkdir()
    (root / "filter" / f"{src}.tsv").write_text("clip_id\tperson_share\tcuts\tkeep\treason\n" + "".join(
        f"{c}\t1.0\t0\t{int(c != ids[0])}\t{'kept' if c != ids[0] else 'scene_cut'}\n" for c in ids))
    entries = {r["video_id"]: {"caption": r["caption"], "qa_pairs": r["qa_pairs"], "reviewed": True}
               for r in reversed(records)}
    entries[ids[4]] = {"caption": "Not reviewed yet.", "qa_pairs": [], "reviewed": False}
    entries[ids[0]] = {"caption": "A rejected clip.", "qa_pairs": pairs(1), "reviewed": True}
    entries["other_001"] = {"caption": "x", "qa_pairs": pairs(3, 2), "reviewed": True}
    reviews = root / "vqa_reviews.json"
    reviews.write_text(json.dumps({"version": 1, "clips": entries}, ensure_ascii=False))
    return vqa_export.run(manifests=[root / "clips" / src / "manifest.tsv"], decisions=[root / "filter" / f"{src}.tsv"],
                          reviews=reviews, out_dir=root / "vqa")


@pytest.mark.skipif(not SAMPLE.is_file(), reason="needs shared/reference (the released sample)")
def test_the_export_rewrites_the_released_sample_byte_for_byte_and_counts_it(tmp_path):
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    jsonschema.validate(sample, RELEASED_SCHEMA)
    summary = released_run(tmp_path, sample)
    assert summary == {"exported": 3, "unreviewed": 1, "problems": 2, "qa_pairs": 18}
    out = tmp_path / "vqa" / "vqa_and_captioning.json"
    jsonschema.validate(json.loads(out.read_text(encoding="utf-8")), RELEASED_SCHEMA)
    assert out.read_bytes() == SAMPLE.read_bytes()
    problems = pd.read_csv(tmp_path / "vqa" / "vqa_report.tsv", sep="\t")
    assert problems["item"].tolist() == ["PrqcwH8LhDU_002", "other_001"]
    assert "clip not kept (filter: scene_cut)" in problems["problem"][0]
    assert "2 unanswerable pairs" in problems["problem"][1]
    stats = tmp_path / "vqa" / "statistics"
    assert sorted(p.name for p in stats.iterdir()) == sorted(vqa.EXPORT_STAT_FILES)
    overall = dict(pd.read_csv(stats / "vqa_overall.csv").itertuples(index=False))
    assert overall["qa pairs"] == 18 and overall["qa pairs per clip (mean)"] == 6.0
    assert (overall["words per caption (min)"], overall["words per caption (max)"]) == (48, 76)
    types = dict(pd.read_csv(stats / "vqa_question_types.csv").set_index("question_type")["count"])
    assert (types["what"], types["who"], types["where"], types["why"], types["how"]) == (12, 3, 1, 1, 1)
    words = pd.read_csv(stats / "vqa_word_frequency.csv")
    assert words.iloc[0].tolist() == ["esa", 5]
    per_clip = pd.read_csv(stats / "vqa_qa_per_clip.csv")
    assert per_clip.set_index("qa_pairs")["clips"].to_dict() == {0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 3}


def test_the_export_without_reviews_is_an_empty_list(tmp_path):
    root = tmp_path
    write_manifest(root / "clips" / "s" / "manifest.tsv", [
        dict(clip_id="s_000", source_id="s", clip_type="r", seq=0, start_s=0, frames=90, width=64, height=64,
             status="ok", reason="")])
    (root / "filter").mkdir()
    (root / "filter" / "s.tsv").write_text("clip_id\tperson_share\tcuts\tkeep\treason\ns_000\t1\t0\t1\tkept\n")
    summary = vqa_export.run(manifests=[root / "clips/s/manifest.tsv"], decisions=[root / "filter/s.tsv"],
                             reviews=None, out_dir=root / "vqa")
    assert summary["exported"] == 0 and (root / "vqa" / "vqa_and_captioning.json").read_text() == "[]"
    assert (root / "vqa" / "statistics" / "vqa_statistics.png").stat().st_size > 0


def test_the_config_and_the_schema_agree_on_the_vqa_defaults():
    import yaml

    schema = yaml.safe_load((REPO / "microg4m" / "schemas" / "config.schema.yaml").read_text())["properties"]["vqa"]
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["vqa"]
    assert config["reviews"] == schema["properties"]["reviews"]["default"]
    assert config["draft"] == {k: v["default"] for k, v in schema["properties"]["draft"]["properties"].items()}
    assert config["draft"]["enabled"] is False  # off by default
