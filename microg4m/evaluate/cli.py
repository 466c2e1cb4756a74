"""``microg4m evaluate {har,captions,vqa}``: the benchmark's command line (docs/evaluation.md).

Registered by microg4m/cli.py; the metrics' libraries are imported only when a command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _ids(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated action ids") from None


def add_arguments(parser: argparse.ArgumentParser, cfg: dict) -> None:
    sub = parser.add_subparsers(dest="task", required=True, metavar="TASK")

    p = sub.add_parser("har", help="action detection: mAP@0.5, macro F1 / recall / AUROC, per-class AP, sweep")
    p.add_argument("--results", default=cfg["results"],
                   help="results folder whose export gives the default ground truth and label map "
                        "(default: %(default)s)")
    p.add_argument("--split", choices=["train", "val", "test"], default="test",
                   help="the export's split for the default ground truth (default: %(default)s)")
    p.add_argument("--gt", help="ground truth, an AVA CSV (default: RESULTS/export/ava_<split>[_gt].csv)")
    p.add_argument("--label-map", help="label map (default: RESULTS/export/label_map.pbtxt)")
    p.add_argument("--detections", help="PySlowFast's detections CSV or mmaction2's result pickle (.pkl)")
    p.add_argument("--mmaction-classes", type=_ids, default=None, metavar="IDS",
                   help="the action ids of a pickle's score columns 1.. (its config's custom_classes; default: "
                        "the label map's ids in ascending order when the count matches, else 1..C-1)")
    p.add_argument("--matched", action="store_true",
                   help="F1, recall and AUROC over boxes matched to persons (IoU >= 0.5), not the protocol's "
                        "per-frame truth (a departure: docs/evaluation.md)")
    p.add_argument("--threshold", type=float, default=0.5, help="score for a positive (default: %(default)s)")
    p.add_argument("--json", help="the figures as JSON (fractions, as PySlowFast's json_stats)")
    p.add_argument("--per-class", help="per-class AP CSV: action_id,ap50,action_name,gt_boxes")
    p.add_argument("--sweep", help="per-class threshold sweep CSV")
    g = p.add_argument_group("the VLM baseline (appendix G.5; settings: config evaluate.vlm)")
    g.add_argument("--vlm", action="store_true",
                   help="ask the endpoint about every person of the split's clips (RESULTS/clips, corrected tracks), "
                        "then score the answers in place of --detections")
    g.add_argument("--vlm-answers", nargs="+", metavar="FILE",
                   help="score answers already given (results/har_vlm/*.json) in place of --detections")
    g.add_argument("--answers-dir", help="where --vlm writes its answers, one file per unit "
                                         "(default: RESULTS/evaluate/har_vlm_<split>/)")
    vlm = cfg["evaluate"]["vlm"]
    for key in ("url", "model", "api_key_env", "prompt"):
        g.add_argument(f"--{key.replace('_', '-')}", dest=f"vlm_{key}", help="(default: the config's)")
    for key in ("frames", "frame_size", "jpeg_quality", "max_tokens", "retries", "concurrency"):
        g.add_argument(f"--{key.replace('_', '-')}", dest=f"vlm_{key}", type=int, help=f"(default: {vlm[key]})")
    for key in ("temperature", "timeout_seconds", "backoff_seconds"):
        g.add_argument(f"--{key.replace('_', '-')}", dest=f"vlm_{key}", type=float, help=f"(default: {vlm[key]})")

    for task, what in (("captions", "captions: {video_id: caption}"),
                       ("vqa", "answers: {video_id: {question: answer}}")):
        p = sub.add_parser(task, help=f"{task}: CIDEr, BLEU-4, ROUGE-L, METEOR, BERTScore F1, "
                                      f"{'S-BERT' if task == 'captions' else 'S-VQA'} (0-100)")
        p.add_argument("--references", help="vqa_and_captioning.json (default: RESULTS/vqa/vqa_and_captioning.json)")
        p.add_argument("--results", default=cfg["results"], help="(default: %(default)s)")
        p.add_argument("--predictions", required=True, help=f"JSON of the model's {what}")
        p.add_argument("--missing", choices=["skip", "empty"], default="skip",
                       help="a reference without a prediction: left out (counted), or scored against an empty "
                            "prediction (default: %(default)s)")
        p.add_argument("--sbert-model", metavar="DIR",
                       help="Sentence-Transformers folder (default: the packaged all-MiniLM-L6-v2)")
        p.add_argument("--bertscore-model", metavar="DIR",
                       help="local model folder for BERTScore (the paper: roberta-large); none: not computed")
        p.add_argument("--bertscore-layers", type=int, help="its layer (default: bert-score's for the folder's "
                                                             "name, e.g. roberta-large 17, else the last)")
        p.add_argument("--tokenize", action="store_true",
                       help="PTB-tokenise first, as COCO's evaluation (the authors' scripts do not)")
        p.add_argument("--json", help="the figures as JSON")


def run(args: argparse.Namespace, cfg: dict):
    if args.task == "har":
        return _har(args, cfg)
    if args.task in ("captions", "vqa"):
        return _text(args)
    raise AssertionError(args.task)


def _text(args: argparse.Namespace) -> dict:
    from microg4m.evaluate import text

    refs = Path(args.references or text.default_references(args.results))
    if not refs.is_file():
        raise ValueError(f"{refs}: no references there (give --references vqa_and_captioning.json)")
    fn = text.evaluate_captions if args.task == "captions" else text.evaluate_vqa
    result = fn(refs, args.predictions, missing=args.missing, sbert_model=args.sbert_model,
                bertscore_model=args.bertscore_model, bertscore_layers=args.bertscore_layers,
                tokenize=args.tokenize)
    if args.json:
        text.write(result, args.json)
    if result["counts"]["without_prediction"]:
        print(f"microg4m evaluate: {result['counts']['without_prediction']} reference(s) without a prediction "
              f"({'scored as empty' if args.missing == 'empty' else 'left out'})", file=sys.stderr)
    return {**result["metrics"], "evaluated": result["counts"]["evaluated"]}


def _har(args: argparse.Namespace, cfg: dict) -> dict:
    from microg4m.evaluate import har

    defaults = har.default_paths(args.results, args.split)
    gt = Path(args.gt or defaults["gt"])
    label_map = Path(args.label_map or defaults["label_map"])
    for name, path in (("ground truth", gt), ("label map", label_map)):
        if not path.is_file():
            raise ValueError(f"{path}: no {name} there (give --{'gt' if name == 'ground truth' else 'label-map'})")
    if sum(map(bool, (args.detections, args.vlm, args.vlm_answers))) != 1:
        raise ValueError("give one of --detections FILE (PySlowFast's CSV or mmaction2's .pkl), --vlm or "
                         "--vlm-answers FILE...")
    if args.vlm or args.vlm_answers:
        from microg4m.evaluate import vlm_har

        answers = args.vlm_answers or _ask_vlm(args, cfg, gt, label_map)
        result = vlm_har.evaluate(answers, gt, label_map)
    else:
        result = har.evaluate(gt, args.detections, label_map, matched=args.matched, threshold=args.threshold,
                              classes=args.mmaction_classes)
    doc = har.write(result, json_path=args.json, per_class=args.per_class, sweep=args.sweep)
    _warn_counts(doc["counts"])
    out = {k: doc[k] for k in ("protocol", "map", "f1_macro", "recall_macro", "auroc_macro", "map_tie_range")}
    return out | ({"vlm": doc["vlm"]} if "vlm" in doc else {})


def _ask_vlm(args: argparse.Namespace, cfg: dict, gt: Path, label_map: Path) -> list[Path]:
    """Ask about the persons of the ground truth's clips, unit by unit; the answer files."""
    from microg4m import config
    from microg4m.evaluate import vlm_har
    from microg4m.formats.ava import read_ava
    from microg4m.formats.unit_plan import FILE as PLAN, read_plan

    settings = dict(config.get(cfg, "evaluate.vlm"))
    settings.update({k[4:]: v for k, v in vars(args).items() if k.startswith("vlm_") and k != "vlm_answers"
                     and v is not None})
    settings = config.validate_section("evaluate.vlm", settings)
    settings.pop("enabled"), settings.pop("split")
    res = Path(args.results)
    plan = res / PLAN
    units = list(read_plan(plan)) if plan.is_file() else sorted(p.parent.name for p in res.glob("clips/*/manifest.tsv"))
    if not units:
        raise ValueError(f"{res}: no clips/<unit>/manifest.tsv: not a results folder")
    clips = set(read_ava(gt, last="person_id")["video_id"])
    out_dir = Path(args.answers_dir or res / "evaluate" / f"har_vlm_{args.split}")
    answers = []
    for unit in units:
        corrected = res / "corrected" / f"{unit}.csv"
        tracks = corrected if corrected.is_file() else res / "tracks" / f"{unit}.csv"
        out = out_dir / f"{unit}.json"
        counts = vlm_har.run(res / "clips" / unit / "manifest.tsv", res / "filter" / f"{unit}.tsv", tracks,
                             label_map, out, clips=clips, **settings)
        print(f"microg4m evaluate: {unit}: {counts}", file=sys.stderr)
        answers.append(out)
    return answers


def _warn_counts(counts: dict) -> None:
    for key, what in (("gt_rows_outside_label_map", "ground-truth rows of an action outside the label map"),
                      ("detection_rows_outside_label_map", "detection rows of an action outside the label map"),
                      ("missing_scores", "box-class scores missing (ranked last)"),
                      ("gt_frames_without_prediction", "ground-truth frames without a predicted box"),
                      ("predicted_frames_without_gt", "predicted frames without ground truth (false positives)")):
        if counts.get(key):
            print(f"microg4m evaluate: {counts[key]} {what}", file=sys.stderr)
