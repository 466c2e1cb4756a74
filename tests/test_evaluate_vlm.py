"""The paper's VLM baseline (microg4m.evaluate.vlm_har; rules har_vlm, har_vlm_eval) against a
loopback OpenAI-compatible server.

``vlm_stub.StubVLM`` is a protocol stand-in, not a model: it checks each request (model,
JPEG images of the right count and size) and, per person, answers valid JSON, JSON with ids
outside the label map and items that are not ids, text without JSON (retried, then
failed), or HTTP 500. The clips are real H.264; the frames it receives are checked for the
red box where the person's track puts it.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from microg4m import cli
from microg4m.evaluate import vlm_har
from microg4m.evaluate.har import LabelMap
from test_annotate_store import clip_video  # noqa: F401  (fixture)
from test_vqa_draft import build_results
from vlm_stub import DOWN, StubVLM
from workflow import REPO, make_workdir, snakemake

MODEL = "stub/test-vlm"
FRAMES, SIZE = 4, 160
PROMPT = "Clip: $video_id person $person_id, $frames frames. Actions:\n$actions\nJSON list of ids only."
LABEL_MAP = REPO / "annotations" / "label_map.pbtxt"
# tracks (pixels, 320 px wide clips): person -> (box, first frame, last frame)
PERSONS = {"iss_000": {1: ((20, 30, 140, 170), 1, 90), 2: ((180, 20, 300, 160), 10, 60)},
           "iss_001": {1: ((40, 40, 200, 170), 1, 90)},
           "iss_002": {1: ((40, 40, 200, 170), 1, 90)},
           "film_000": {1: ((60, 20, 220, 160), 1, 90)}}
REPLIES = {("iss_000", 1): "Sure:\n```json\n[12, 17]\n```",
           ("iss_000", 2): '{"actions": [12, 999, "walk", "80"]}',
           ("iss_001", 1): "[]",
           ("iss_002", 1): "The person is standing."}
GT_ACTIONS = {("iss_000", 1): [12, 17], ("iss_000", 2): [80, 14], ("iss_001", 1): [11], ("iss_002", 1): [12],
              ("film_000", 1): [12]}


def add_tracks_and_export(res, size):
    w, h = size
    for unit in ("iss", "film"):
        rows = [(clip, f, pid, *box, 0.9) for clip, people in PERSONS.items() if clip.startswith(unit)
                for pid, (box, first, last) in people.items() for f in range(first, last + 1)]
        (res / "corrected").mkdir(exist_ok=True)
        pd.DataFrame(rows, columns=["video_id", "frame_id", "person_id", "xmin", "ymin", "xmax", "ymax", "conf"]) \
            .to_csv(res / "corrected" / f"{unit}.csv", index=False)
    export = res / "export"
    export.mkdir(exist_ok=True)
    (export / "label_map.pbtxt").write_bytes(LABEL_MAP.read_bytes())
    lines = []
    for (clip, pid), actions in GT_ACTIONS.items():
        x1, y1, x2, y2 = PERSONS[clip][pid][0]
        box = f"{x1 / w:.3f},{y1 / h:.3f},{x2 / w:.3f},{y2 / h:.3f}"
        lines += [f"{clip},45,{box},{a},{pid}\n" for a in actions]
    (export / "ava_test_gt.csv").write_text("".join(lines))
    return res


class Answers:
    """The stand-in's replies, and a check of every frame it is sent."""

    def __init__(self, size):
        self.k = SIZE / max(size)
        self.problems, self.asked = [], []

    def __call__(self, text, images):
        m = re.search(r"Clip: (\S+) person (\d+), (\d+) frames", text)
        clip, pid = m.group(1), int(m.group(2))
        self.asked.append((clip, pid))
        if "12: stand" not in text or "80: watch (a person)" not in text:
            self.problems.append(f"{clip} {pid}: the prompt lacks the label map")
        x1, y1, x2, y2 = (round(v * self.k) for v in PERSONS[clip][pid][0])
        for img in images:  # the left and right edges at mid-height, the bottom edge in the middle
            ym, xm = (y1 + y2) // 2, (x1 + x2) // 2
            for x, y in ((x1, ym), (x2, ym), (xm, y2)):
                b, g, r = img[y - 1: y + 2, x - 1: x + 2].reshape(-1, 3).astype(int).mean(axis=0)
                if not (r > 150 and g < 100 and b < 100):
                    self.problems.append(f"{clip} {pid}: no red box edge at ({x}, {y}): bgr {b:.0f} {g:.0f} {r:.0f}")
            if img[ym - 3: ym + 4, xm - 3: xm + 4, 2].mean() > 200 > img[ym - 3: ym + 4, xm - 3: xm + 4, :2].max():
                self.problems.append(f"{clip} {pid}: the inside of the box is painted")
        return REPLIES.get((clip, pid), "[12]")


def settings(url: str, **over) -> dict:
    s = dict(url=url, model=MODEL, api_key_env=None, frames=FRAMES, frame_size=SIZE, jpeg_quality=90, prompt=PROMPT,
             temperature=0.0, max_tokens=64, timeout_seconds=5, retries=3, backoff_seconds=0.01, concurrency=2)
    s.update(over)
    return s


@pytest.fixture(scope="module")
def asked(tmp_path_factory, clip_video):  # noqa: F811
    """Both units asked directly (vlm_har.run), as rule har_vlm does."""
    video, size = clip_video
    res = add_tracks_and_export(build_results(tmp_path_factory.mktemp("vlm") / "results", video, size), size)
    answers = Answers(size)
    out = {}
    with StubVLM(model=MODEL, api_key=None, frames=FRAMES, frame_size=SIZE, behaviour={"film_000": DOWN},
                 answer=answers) as stub:
        for unit in ("iss", "film"):
            out[unit] = vlm_har.run(res / "clips" / unit / "manifest.tsv", res / "filter" / f"{unit}.tsv",
                                    res / "corrected" / f"{unit}.csv", LABEL_MAP, res / "har_vlm" / f"{unit}.json",
                                    **settings(stub.url))
    return res, answers, stub, out


def records(res, unit):
    return {(r["video_id"], r["person_id"]): r
            for r in json.loads((res / "har_vlm" / f"{unit}.json").read_text())["persons"]}


def test_each_person_is_shown_highlighted_with_the_label_maps_actions(asked):
    res, answers, stub, _ = asked
    assert stub.problems == [] and answers.problems == []
    assert sorted(set(answers.asked)) == [("iss_000", 1), ("iss_000", 2), ("iss_001", 1), ("iss_002", 1)]
    recs = records(res, "iss")
    assert all(10 <= f <= 60 for f in recs[("iss_000", 2)]["frames"])  # only frames where person 2 has a box
    assert recs[("iss_000", 1)]["frames"] == [12, 34, 57, 79]


def test_valid_invalid_and_malformed_answers(asked):
    res, _, stub, out = asked
    recs = records(res, "iss")
    ok = recs[("iss_000", 1)]
    assert ok["status"] == "ok" and ok["actions"] == [12, 17] and ok["invalid"] == [] and ok["attempts"] == 1
    mixed = recs[("iss_000", 2)]
    assert mixed["actions"] == [12, 80] and mixed["invalid"] == ["999", "walk"]
    assert recs[("iss_001", 1)]["status"] == "ok" and recs[("iss_001", 1)]["actions"] == []
    bad = recs[("iss_002", 1)]
    assert bad["status"] == "failed" and bad["attempts"] == 3
    assert bad["reason"].startswith("malformed reply: no JSON list of action ids") and "after 3 attempts" in bad["reason"]
    assert out["iss"] == {"persons": 4, "ok": 3, "failed": 1, "invalid_ids": 2}
    down = records(res, "film")[("film_000", 1)]
    assert down["status"] == "failed" and down["reason"].startswith("HTTP 500")
    doc = json.loads((res / "har_vlm" / "iss.json").read_text())
    assert doc["model"] == MODEL and doc["prompt_hash"] == vlm_har.prompt_hash(PROMPT)
    assert doc["label_ids"] == LabelMap.read(LABEL_MAP).ids


def test_the_figures_as_in_table_11(asked):
    res, _, _, _ = asked
    r = vlm_har.evaluate([res / "har_vlm" / "iss.json", res / "har_vlm" / "film.json"],
                         res / "export" / "ava_test_gt.csv", res / "export" / "label_map.pbtxt")
    assert r["vlm"] == {"persons": 5, "answered": 3, "failed": 2, "unanswered": 0, "invalid_ids": 2}
    # rows: iss_000 p1 {12, 17}, p2 {12, 80}, iss_001 {}, iss_002 (failed) {}, film_000 (failed) {}.
    # per-frame truth: both iss_000 rows hold 12, 17, 80, 14; classes 12, 17, 80 reach F1 2/3, recall 1/2;
    # every other of the 50 classes counts 0
    assert r["f1_macro"] == pytest.approx(3 * (2 / 3) / 50)
    assert r["recall_macro"] == pytest.approx(3 * 0.5 / 50)
    # AUROC over 11, 12, 14, 17, 80: 12, 17, 80 -> 0.75; 14, 11 (all scores 0) -> 0.5
    assert r["auroc_macro"] == pytest.approx((3 * 0.75 + 2 * 0.5) / 5)
    # class 12, three boxes: scores 1 (TP), 1 (FP), 0 (FP), 0 (TP), 0 (TP): AP 0.6 to 5/6 over tied orders
    lo, hi = r["ap_per_class"]["12"]["ap_tie_range"]
    assert (lo, hi) == (pytest.approx(0.6), pytest.approx(5 / 6))
    assert r["map_tie_range"][0] <= r["map"] <= r["map_tie_range"][1]


def test_parse_actions():
    valid = {12, 17, 80}
    assert vlm_har.parse_actions("[17, 12, 12]", valid)[:2] == ([12, 17], [])
    assert vlm_har.parse_actions('{"action_ids": ["80", 3.0, true]}', valid)[:2] == ([80], ["3.0", "true"])
    assert vlm_har.parse_actions("I see: [12] (standing).", valid)[:2] == ([12], [])
    for text in ("standing", '{"a": [1], "b": [2]}', "[12, "):
        with pytest.raises(ValueError, match="no JSON list"):
            vlm_har.parse_actions(text, valid)


def test_the_command_asks_the_splits_persons_and_scores_them(tmp_path, clip_video, capsys):  # noqa: F811
    video, size = clip_video
    res = add_tracks_and_export(build_results(tmp_path / "results", video, size), size)
    answers = Answers(size)
    with StubVLM(model=MODEL, api_key=None, frames=FRAMES, frame_size=SIZE, answer=answers) as stub:
        assert cli.main(["evaluate", "har", "--vlm", "--results", str(res), "--url", stub.url, "--model", MODEL,
                         "--frames", str(FRAMES), "--frame-size", str(SIZE), "--prompt", PROMPT,
                         "--backoff-seconds", "0.01", "--json", str(tmp_path / "vlm.json")]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["vlm"]["persons"] == 5 and printed["vlm"]["failed"] == 1  # iss_002; film_000 answers here
    answered = {p for p in answers.asked}
    assert ("iss_003", 1) not in answered and ("film_000", 1) in answered  # only the split's clips
    assert sorted(p.name for p in (res / "evaluate" / "har_vlm_test").iterdir()) == ["film.json", "iss.json"]
    doc = json.loads((tmp_path / "vlm.json").read_text())
    assert doc["vlm"]["invalid_ids"] == 2 and doc["f1_macro"] == printed["f1_macro"]
    # the same answers scored again, without asking
    assert cli.main(["evaluate", "har", "--results", str(res), "--vlm-answers",
                     *map(str, sorted((res / "evaluate" / "har_vlm_test").iterdir()))]) == 0
    assert json.loads(capsys.readouterr().out)["f1_macro"] == printed["f1_macro"]


def test_the_workflow_rules(tmp_path, clip_video):  # noqa: F811
    video, size = clip_video
    wd = tmp_path
    add_tracks_and_export(build_results(wd / "results", video, size), size)
    sources = "source_id\turl\tclip_type\niss\tfilms/iss.mp4\tr\nfilm\tfilms/film.mp4\tm\n"
    answers = Answers(size)
    with StubVLM(model=MODEL, api_key=None, frames=FRAMES, frame_size=SIZE, answer=answers) as stub:
        make_workdir(wd, sources=sources, config={"evaluate": {"vlm": {"enabled": True, "split": "test",
                                                                          **settings(stub.url)}}})
        snakemake(wd, "--allowed-rules", "har_vlm", "har_vlm_eval", "--", "results/evaluate/har_vlm.json")
    doc = json.loads((wd / "results/evaluate/har_vlm.json").read_text())
    assert doc["status"] == "ok" and doc["split"] == "test" and doc["vlm"]["persons"] == 5
    assert len(pd.read_csv(wd / "results/evaluate/har_vlm_ap_per_class.csv")) == 50
    assert answers.problems == [] and json.loads((wd / "results/har_vlm/iss.json").read_text())["counts"]["ok"] == 3
    # no labels for the split: the figures say so, the run goes on
    (wd / "results/export/ava_test_gt.csv").write_text("")
    from microg4m.evaluate.vlm_har import score_split

    out = score_split([wd / "results/har_vlm/iss.json"], wd / "results/export", "test", tmp_path / "x.json",
                      tmp_path / "x.csv")
    assert out["status"] == "no ground truth" and out["answers"]["persons"] == 4
    assert np.array_equal(pd.read_csv(tmp_path / "x.csv").columns, ["action_id", "ap50", "action_name", "gt_boxes"])
