"""Drafting captions and QA pairs (rule vqa_draft) against an OpenAI-compatible HTTP server.

No real vision-language model can run here: ``vlm_stub.StubVLM`` is a protocol stand-in
on 127.0.0.1 (it checks the requests' shape and answers canned text, including slow
answers, error statuses, a body that is not JSON and replies that are not the asked-for
JSON). The requests are real HTTP from the ``openai`` client; the clips are real H.264.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from datetime import datetime
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from microg4m.vqa import draft as vqa_draft
from microg4m.formats.records import RECORD_COLUMNS
from microg4m.formats.manifest import write_manifest
from microg4m.common.media import read_frames
from microg4m.vqa.vlm import frame_indices, sample_frames
from microg4m.vqa.rules import MAX_PAIRS, UNANSWERABLE, warnings_for
from test_annotate_store import clip_video  # noqa: F401  (fixture)
from vlm_stub import CAPTION, DOWN, ERROR_ONCE, MALFORMED_QA, NOT_JSON, OK, SLOW_ONCE, StubVLM
from workflow import make_workdir, snakemake

MODEL = "stub/test-vlm"
KEY_ENV = "MICROG4M_TEST_VLM_KEY"
KEY = "sk-test-123"
FRAMES, SIZE = 4, 160
BEHAVIOUR = {"iss_000": OK, "iss_001": SLOW_ONCE, "iss_002": ERROR_ONCE, "iss_003": DOWN,
             "iss_004": MALFORMED_QA, "iss_005": NOT_JSON, "film_000": OK}
# the tests' templates name the clip so that the stand-in can pick its behaviour
CAPTION_PROMPT = "Clip: $video_id. Title: $title. Describe these $frames frames."
QA_PROMPT = 'Clip: $video_id. Caption: "$caption". Write $candidates pairs, we keep $keep. JSON only.'


def draft_settings(url: str, **over) -> dict:
    s = dict(url=url, model=MODEL, api_key_env=KEY_ENV, frames=FRAMES, frame_size=SIZE, jpeg_quality=80,
             caption_prompt=CAPTION_PROMPT, qa_prompt=QA_PROMPT, candidates=11, keep=6, unanswerable=True,
             temperature=0.0, max_tokens=256, timeout_seconds=2.5, retries=3, backoff_seconds=0.05, concurrency=4)
    s.update(over)
    return s


def build_results(root: Path, video: Path, size) -> Path:
    """Units ``iss`` (real: iss_000..005 kept, iss_006 rejected) and ``film`` (movie: film_000 kept)."""
    w, h = size
    for src, ctype, n_clips in (("iss", "r", 7), ("film", "m", 1)):
        folder = root / "clips" / src
        folder.mkdir(parents=True)
        clips = [f"{src}_{i:03d}" for i in range(n_clips)]
        for c in clips:
            shutil.copy(video, folder / f"{c}.mp4")
        write_manifest(folder / "manifest.tsv", [
            dict(clip_id=c, source_id=src, clip_type=ctype, seq=i, start_s=3 * i, frames=90, width=w, height=h,
                 status="ok", reason="") for i, c in enumerate(clips)])
        (root / "filter").mkdir(exist_ok=True)
        (root / "filter" / f"{src}.tsv").write_text("clip_id\tperson_share\tcuts\tkeep\treason\n" + "".join(
            f"{c}\t1.0000\t0\t{0 if c == 'iss_006' else 1}\t{'few_persons' if c == 'iss_006' else 'kept'}\n"
            for c in clips))
        (root / "download").mkdir(exist_ok=True)
        rec = dict.fromkeys(RECORD_COLUMNS, "")
        rec.update(source_id=src, status="ok", title="ISS tour with the crew" if src == "iss" else "")
        (root / "download" / f"{src}.tsv").write_text(
            "\t".join(RECORD_COLUMNS) + "\n" + "\t".join(str(rec[c]) for c in RECORD_COLUMNS) + "\n")
    return root


def test_frames_are_spread_evenly_and_sent_as_small_jpegs(clip_video):  # noqa: F811
    assert frame_indices(90, 8) == [5, 16, 28, 39, 50, 61, 73, 84]
    assert frame_indices(90, 1) == [45] and frame_indices(3, 8) == [0, 1, 2]
    urls = sample_frames(clip_video[0], 3, 100, 80)
    assert len(urls) == 3 and all(u.startswith("data:image/jpeg;base64,") for u in urls)
    imgs = [cv2.imdecode(np.frombuffer(base64.b64decode(u.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
            for u in urls]
    assert max(imgs[0].shape[:2]) == 100  # 320 px wide clip, scaled down to 100
    frames = read_frames(clip_video[0])
    for img, i in zip(imgs, frame_indices(90, 3)):  # frames 16, 46, 76 of the clip, in order
        want = cv2.resize(frames[i], (img.shape[1], img.shape[0]), interpolation=cv2.INTER_AREA)
        others = [cv2.resize(frames[j], (img.shape[1], img.shape[0]), interpolation=cv2.INTER_AREA)
                  for j in frame_indices(90, 3) if j != i]
        diff = np.abs(img.astype(int) - want).mean()
        assert diff < 4 and all(diff < np.abs(img.astype(int) - o).mean() for o in others)


def test_a_missing_key_variable_is_named_and_a_wrong_key_fails_each_clip_without_retries(
        tmp_path, clip_video, monkeypatch):  # noqa: F811
    res = build_results(tmp_path / "results", *clip_video)
    args = (res / "clips/film/manifest.tsv", res / "filter/film.tsv", tmp_path / "film.json")
    with StubVLM(model=MODEL, api_key=KEY, frames=FRAMES, frame_size=SIZE) as stub:
        monkeypatch.delenv(KEY_ENV, raising=False)
        with pytest.raises(ValueError, match=f"environment variable {KEY_ENV} is not set"):
            vqa_draft.run(*args, **draft_settings(stub.url))
        monkeypatch.setenv(KEY_ENV, "sk-wrong")
        assert vqa_draft.run(*args, **draft_settings(stub.url)) == {"clips": 1, "ok": 0, "failed": 1}
        rec = json.loads(args[2].read_text())["clips"][0]
        assert rec["reason"].startswith("caption: HTTP 401") and rec["reason"].endswith("(not retried)")
        assert rec["attempts"] == 1 and [r["status"] for r in stub.requests] == [401]
    # nothing listening: the clip fails with the connection error, the run goes on
    monkeypatch.setenv(KEY_ENV, KEY)
    counts = vqa_draft.run(*args, **draft_settings("http://127.0.0.1:9/v1", retries=2))
    assert counts["failed"] == 1
    assert "connection error" in json.loads(args[2].read_text())["clips"][0]["reason"]


def test_the_command_line_drafts_and_exports_with_the_same_code(tmp_path, clip_video, capsys):  # noqa: F811
    from microg4m import cli

    res = build_results(tmp_path / "results", *clip_video)
    out = tmp_path / "film.json"
    with StubVLM(model=MODEL, api_key=None, frames=FRAMES, frame_size=SIZE) as stub:
        assert cli.main(["vqa-draft", str(res / "clips/film/manifest.tsv"), str(res / "filter/film.tsv"), str(out),
                         "--url", stub.url, "--model", MODEL, "--frames", str(FRAMES), "--frame-size", str(SIZE),
                         "--caption-prompt", CAPTION_PROMPT, "--qa-prompt", QA_PROMPT, "--no-unanswerable"]) == 0
    assert json.loads(capsys.readouterr().out) == {"clips": 1, "ok": 1, "failed": 0}
    rec = json.loads(out.read_text())["clips"][0]
    assert rec["status"] == "ok" and UNANSWERABLE not in [p["A"] for p in rec["qa_pairs"]]
    assert cli.main(["vqa-export", str(res), str(tmp_path / "vqa"), "--reviews", str(tmp_path / "none.json")]) == 0
    assert (tmp_path / "vqa" / "vqa_and_captioning.json").read_text() == "[]"


@pytest.fixture(scope="module")
def drafted(tmp_path_factory, clip_video):  # noqa: F811
    """One Snakemake run of vqa_draft (both units) and vqa_export, then the report."""
    wd = tmp_path_factory.mktemp("vqa_wf")
    build_results(wd / "results", *clip_video)
    sources = "source_id\turl\tclip_type\niss\tfilms/iss.mp4\tr\nfilm\tfilms/film.mp4\tm\n"
    with StubVLM(model=MODEL, api_key=KEY, frames=FRAMES, frame_size=SIZE, behaviour=BEHAVIOUR,
                 slow_seconds=3.5, reply_delay=0.2) as stub:
        make_workdir(wd, sources=sources, config={"vqa": {"draft": {"enabled": True, **draft_settings(stub.url)}}})
        reviews = {"clips": {
            "iss_000": {"caption": CAPTION, "qa_pairs": [{"Q": "What does the astronaut reach for?",
                                                        "A": "A silver camera."}], "reviewed": True},
            "iss_001": {"caption": "Not checked yet.", "qa_pairs": [], "reviewed": False},
            "iss_006": {"caption": "A rejected clip.", "qa_pairs": [], "reviewed": True}}}
        (wd / "annotations" / "vqa_reviews.json").write_text(json.dumps(reviews))
        os.environ[KEY_ENV] = KEY
        try:
            # only the VQA rules: the clips, filter decisions and download records are given
            proc = snakemake(wd, "--allowed-rules", "vqa_draft", "vqa_export", "--",
                             "results/vqa_drafts/iss.json", "results/vqa_drafts/film.json",
                             "results/vqa/vqa_and_captioning.json")
            report = snakemake(wd, "--report", "report.html", "--allowed-rules", "vqa_draft", "vqa_export",
                               "--", "results/vqa_drafts/iss.json", "results/vqa/vqa_and_captioning.json")
        finally:
            os.environ.pop(KEY_ENV, None)
    drafts = {}
    for unit in ("iss", "film"):
        drafts.update({r["video_id"]: r for r in json.loads((wd / f"results/vqa_drafts/{unit}.json").read_text())["clips"]})
    return wd, stub, drafts, proc, report


def test_requests_have_the_protocol_shape_and_run_concurrently(drafted):
    _, stub, _, _, _ = drafted
    assert stub.problems == []  # model name, images as JPEG data URLs of the right count and size
    assert stub.max_in_flight >= 2  # concurrency 4: several requests were in flight at once
    kinds = {(r["kind"], r["clip"]) for r in stub.requests}
    assert ("caption", "iss_006") not in kinds  # the rejected clip is not drafted


def test_good_clips_get_six_ranked_pairs_with_the_model_and_prompt_hash(drafted):
    wd, _, drafts, _, _ = drafted
    assert sorted(drafts) == ["film_000", "iss_000", "iss_001", "iss_002", "iss_003", "iss_004", "iss_005"]
    doc = json.loads((wd / "results/vqa_drafts/iss.json").read_text())
    assert doc["model"] == MODEL and doc["counts"] == {"clips": 6, "ok": 3, "failed": 3}
    phash = vqa_draft.prompt_hash(CAPTION_PROMPT, QA_PROMPT)
    for cid in ("iss_000", "film_000"):
        d = drafts[cid]
        assert d["status"] == "ok" and d["reason"] == "" and d["caption"] == CAPTION
        assert d["model"] == MODEL and d["prompt_hash"] == phash and d["attempts"] == 2
        assert datetime.strptime(d["time"], "%Y-%m-%dT%H:%M:%SZ")
        pairs = d["qa_pairs"]
        assert len(pairs) == MAX_PAIRS and sum(p["A"] == UNANSWERABLE for p in pairs) == 1
        assert not any(warnings_for(p["Q"] + " " + p["A"]) for p in pairs if p["A"] != UNANSWERABLE)
        why = {c["Q"]: c["reason"] for c in d["candidates"] if c["status"] == "dropped"}
        assert why["What sound does the camera make?"] == "about sound (not visible)"
        assert why["Why does the astronaut want the camera?"] == "about intent (not visible)"
        assert why["What is the astronaut wearing?"].startswith(("ranked below", "repeats"))
        kept = [c for c in d["candidates"] if c["status"] == "kept"]
        assert [c["rank"] for c in kept] != [] and all(0 <= c["score"] <= 1 for c in kept)


def test_slow_down_and_malformed_answers_are_retried_then_recorded_and_the_run_goes_on(drafted):
    _, stub, drafts, proc, _ = drafted
    assert proc.returncode == 0
    assert drafts["iss_001"]["status"] == "ok" and drafts["iss_001"]["attempts"] == 3  # timed out once
    assert drafts["iss_002"]["status"] == "ok" and drafts["iss_002"]["attempts"] == 3  # HTTP 503 once
    down = drafts["iss_003"]
    assert down["status"] == "failed" and down["qa_pairs"] == []
    assert down["reason"] == 'caption: HTTP 500: {"error": {"message": "model worker crashed"}} (after 3 attempts)'
    bad_qa = drafts["iss_004"]
    assert bad_qa["status"] == "failed" and bad_qa["caption"] == CAPTION  # the caption is kept
    assert bad_qa["reason"].startswith("qa: malformed reply: no JSON array of QA pairs")
    assert drafts["iss_005"]["reason"].startswith("caption: malformed reply: JSONDecodeError")
    attempts = [r for r in stub.requests if r["clip"] == "iss_003"]
    assert len(attempts) == 3 and {r["status"] for r in attempts} == {500}


def test_the_export_takes_reviewed_kept_clips_only_and_the_report_has_it(drafted):
    wd, _, _, _, report = drafted
    out = wd / "results" / "vqa"
    records = json.loads((out / "vqa_and_captioning.json").read_text())
    assert records == [{"video_id": "iss_000", "caption": CAPTION,
                        "qa_pairs": [{"Q": "What does the astronaut reach for?", "A": "A silver camera."}]}]
    problems = (out / "vqa_report.tsv").read_text().splitlines()
    assert len(problems) == 2 and "iss_006\tclip not kept (filter: few_persons); left out" in problems[1]
    html = (wd / "report.html").read_text(errors="replace")
    for name in ("Captions and VQA", "vqa_and_captioning.json", "vqa_statistics.png", "iss.json"):
        assert name in html, name
    assert yaml.safe_load((wd / "config" / "config.yaml").read_text())["vqa"]["draft"]["enabled"] is True
