"""The HAR metrics of the benchmark (microg4m.evaluate.har) on small cases checked by hand.

Label map: three classes, ids 1, 3, 5. Each case's figures are worked out in the comments
from the definitions in docs/evaluation.md (the authors' helper: per-frame truth for F1,
recall and AUROC; the PASCAL evaluator for mAP) and from the box-matched departure.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from microg4m import cli
from microg4m.evaluate import har

LABEL_MAP = "\n\n".join(
    f'item {{\n  name: "{name}"\n  id: {i}\n  label_type: PERSON_MOVEMENT\n}}'
    for i, name in ((1, "bend/bow (at the waist)"), (3, "crouch/kneel"), (5, "fall down")))
B1, B2, B3, B4 = (0.1, 0.1, 0.4, 0.9), (0.5, 0.1, 0.9, 0.9), (0.2, 0.2, 0.6, 0.8), (0.3, 0.1, 0.7, 0.95)


def write_case(tmp_path, gt: list[tuple], det: list[tuple]):
    """Ground truth rows (clip, stamp, box, action, person) and detection rows (clip, stamp,
    box, {action: score}) as the export and PySlowFast write them (stamps zero-padded there)."""
    (tmp_path / "label_map.pbtxt").write_text(LABEL_MAP)
    (tmp_path / "gt.csv").write_text("".join(
        f"{c},{s},{','.join(map(str, b))},{a},{p}\n" for c, s, b, a, p in gt))
    (tmp_path / "det.csv").write_text("".join(
        f"{c},{s:04d},{','.join(f'{v:.3f}' for v in b)},{a},{score:.4f}\n"
        for c, s, b, scores in det for a, score in scores.items()))
    return tmp_path / "gt.csv", tmp_path / "det.csv", tmp_path / "label_map.pbtxt"


def run(paths, **kw) -> dict:
    return har.evaluate(*paths, **kw)


def test_a_perfect_run_scores_one_everywhere(tmp_path):
    # one person per frame, each predicted with its own box; a score of exactly 0.5 is positive (>=)
    paths = write_case(
        tmp_path,
        gt=[("a_000", 45, B1, 1, 1), ("b_000", 10, B2, 3, 1), ("c_000", 20, B3, 5, 1)],
        det=[("a_000", 45, B1, {1: 0.9, 3: 0.1, 5: 0.1}), ("b_000", 10, B2, {1: 0.1, 3: 0.5, 5: 0.1}),
             ("c_000", 20, B3, {1: 0.1, 3: 0.1, 5: 0.9})])
    for matched in (False, True):
        r = run(paths, matched=matched)
        assert (r["map"], r["f1_macro"], r["recall_macro"], r["auroc_macro"]) == (1.0, 1.0, 1.0, 1.0)
        assert r["map_tie_range"] == [1.0, 1.0]
        assert {a: v["ap"] for a, v in r["ap_per_class"].items()} == {"1": 1.0, "3": 1.0, "5": 1.0}


def test_a_missed_box(tmp_path):
    # frame a_000 holds B1 (action 1) and B2 (action 3); B2 is not predicted. b_000: B3 (3), c_000: B4 (5).
    paths = write_case(
        tmp_path,
        gt=[("a_000", 45, B1, 1, 1), ("a_000", 45, B2, 3, 2), ("b_000", 10, B3, 3, 1), ("c_000", 20, B4, 5, 1)],
        det=[("a_000", 45, B1, {1: 0.9, 3: 0.1, 5: 0.1}), ("b_000", 10, B3, {1: 0.1, 3: 0.9, 5: 0.1}),
             ("c_000", 20, B4, {1: 0.1, 3: 0.1, 5: 0.9})])
    r = run(paths)
    # mAP: class 1 AP 1; class 3: B3 (0.9) is a TP, B1 and B4 (0.1) are FPs, B2 is never found:
    # precision 1 up to recall 1/2, so AP 0.5; class 5 AP 1 -> (1 + 0.5 + 1) / 3
    assert r["ap_per_class"]["3"]["ap"] == pytest.approx(0.5)
    assert r["map"] == pytest.approx(2.5 / 3)
    # rows B1, B3, B4. Per-frame truth: B1's row holds 1 and 3 (B2's action is in its frame).
    # class 3: truth (1, 1, 0), predicted (0, 1, 0): recall 1/2, F1 2/3; classes 1, 5: 1
    assert r["f1_macro"] == pytest.approx((1 + 2 / 3 + 1) / 3)
    assert r["recall_macro"] == pytest.approx((1 + 0.5 + 1) / 3)
    # AUROC class 3: positives score 0.1 and 0.9, the negative 0.1 -> (0.5 + 1) / 2
    assert r["auroc_macro"] == pytest.approx((1 + 0.75 + 1) / 3)
    assert r["counts"]["predicted_boxes"] == 3 and r["counts"]["gt_frames_without_prediction"] == 0
    # box-matched: B1's row holds action 1 only; the missed B2 adds a row (action 3, no positive score)
    m = run(paths, matched=True)
    assert m["map"] == r["map"] and m["counts"]["missed_persons"] == 1
    assert m["f1_macro"] == pytest.approx((1 + 2 / 3 + 1) / 3)
    # class 3 over B1, B3, B4, B2: truth (0, 1, 0, 1), scores (0.1, 0.9, 0.1, lowest): (1 + 1 + 0 + 0) / 4
    assert m["auroc_macro"] == pytest.approx((1 + 0.5 + 1) / 3)


def test_a_class_absent_from_the_truth(tmp_path):
    # class 5 has no ground truth; B2 scores 0.7 for it (a false positive)
    paths = write_case(
        tmp_path,
        gt=[("a_000", 45, B1, 1, 1), ("b_000", 10, B2, 3, 1)],
        det=[("a_000", 45, B1, {1: 0.9, 3: 0.1, 5: 0.1}), ("b_000", 10, B2, {1: 0.1, 3: 0.9, 5: 0.7})])
    r = run(paths)
    assert r["ap_per_class"]["5"]["ap"] is not None and math.isnan(r["ap_per_class"]["5"]["ap"])
    assert r["map"] == 1.0 and r["counts"]["classes_with_gt"] == 2  # AP: mean over classes with truth
    # F1 and recall: the class counts, as 0, in the macro mean (scikit-learn, zero_division=0)
    assert r["f1_macro"] == pytest.approx(2 / 3) and r["recall_macro"] == pytest.approx(2 / 3)
    # AUROC: only the classes whose truth column holds both values
    assert r["auroc_macro"] == 1.0 and r["counts"]["auroc_classes"] == 2
    table = har.per_class_table(r)
    assert table.to_dict("records")[2] == {"action_id": 5, "ap50": "nan", "action_name": "fall down", "gt_boxes": 0}


def test_two_persons_in_a_frame_are_one_truth_set_in_the_protocol_and_not_when_matched(tmp_path):
    # the authors' per-frame truth: a perfect prediction of two persons in one frame is not perfect
    paths = write_case(
        tmp_path,
        gt=[("a_000", 45, B1, 1, 1), ("a_000", 45, B2, 3, 2), ("c_000", 20, B3, 5, 1)],
        det=[("a_000", 45, B1, {1: 0.9, 3: 0.1, 5: 0.1}), ("a_000", 45, B2, {1: 0.1, 3: 0.9, 5: 0.1}),
             ("c_000", 20, B3, {1: 0.1, 3: 0.1, 5: 0.9})])
    r = run(paths)
    assert r["map"] == 1.0
    assert r["f1_macro"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)  # classes 1 and 3: recall 1/2
    assert r["auroc_macro"] == pytest.approx((0.75 + 0.75 + 1) / 3)
    m = run(paths, matched=True)
    assert (m["f1_macro"], m["recall_macro"], m["auroc_macro"]) == (1.0, 1.0, 1.0)


def test_tied_scores_give_a_range_of_map(tmp_path):
    # 0/1 scores (the VLM baseline): the evaluator's order among ties decides the AP
    paths = write_case(
        tmp_path,
        gt=[("a_000", 45, B1, 1, 1), ("b_000", 10, B2, 3, 1)],
        det=[("a_000", 45, B1, {1: 1.0, 3: 0.0, 5: 0.0}), ("b_000", 10, B2, {1: 1.0, 3: 0.0, 5: 0.0})])
    r = run(paths)
    low, high = r["map_tie_range"]
    # class 1: TP and FP both at 1.0 -> AP 1 (TP first) or 0.5; class 3: its TP at 0.0 ties with
    # B1's 0.0 -> AP 1 or 0.5
    assert (low, high) == (0.5, 1.0) and low <= r["map"] <= high
    assert r["ap_per_class"]["1"]["ap_tie_range"] == r["ap_per_class"]["3"]["ap_tie_range"] == [0.5, 1.0]


def test_the_sweep_finds_each_classs_best_threshold(tmp_path):
    paths = write_case(
        tmp_path,
        gt=[("a_000", 45, B1, 1, 1), ("b_000", 10, B2, 1, 1), ("c_000", 20, B3, 3, 1)],
        det=[("a_000", 45, B1, {1: 0.3, 3: 0.1, 5: 0.1}), ("b_000", 10, B2, {1: 0.4, 3: 0.1, 5: 0.1}),
             ("c_000", 20, B3, {1: 0.2, 3: 0.8, 5: 0.1})])
    r = run(paths)
    sweep = r["_sweep"].set_index("action_id")
    assert sweep.at[1, "f1"] == 0.0  # nothing reaches 0.5
    assert sweep.at[1, "best_threshold"] == pytest.approx(0.3) and sweep.at[1, "best_f1"] == 1.0
    assert sweep.at[3, "best_f1"] == 1.0 and sweep.at[1, "positives"] == 2
    assert np.isnan(sweep.at[5, "best_threshold"])  # no positive: no threshold to find


def test_the_command_writes_the_json_per_class_and_sweep_files(tmp_path, capsys):
    gt, det, lm = write_case(
        tmp_path,
        gt=[("a_000", 45, B1, 1, 1), ("b_000", 10, B2, 3, 1)],
        det=[("a_000", 45, B1, {1: 0.9, 3: 0.1, 5: 0.1}), ("b_000", 10, B2, {1: 0.1, 3: 0.9, 5: 0.7})])
    out = tmp_path / "out"
    assert cli.main(["evaluate", "har", "--gt", str(gt), "--detections", str(det), "--label-map", str(lm),
                     "--json", str(out / "har.json"), "--per-class", str(out / "ap.csv"),
                     "--sweep", str(out / "sweep.csv")]) == 0
    printed = json.loads(capsys.readouterr().out)
    doc = json.loads((out / "har.json").read_text())
    assert printed["map"] == doc["map"] == 1.0 and doc["f1_macro"] == pytest.approx(2 / 3)
    assert set(doc) >= {"map", "f1_macro", "recall_macro", "auroc_macro", "ap_per_class", "counts"}
    assert doc["ap_per_class"]["5"] == {"name": "fall down", "ap": None, "ap_tie_range": [None, None], "gt_boxes": 0}
    ap = pd.read_csv(out / "ap.csv")
    assert list(ap.columns) == ["action_id", "ap50", "action_name", "gt_boxes"] and len(ap) == 3
    assert len(pd.read_csv(out / "sweep.csv")) == 3


def test_a_bad_row_is_named_with_its_line_and_nothing_is_written(tmp_path, capsys):
    gt, det, lm = write_case(tmp_path, gt=[("a_000", 45, B1, 1, 1)], det=[("a_000", 45, B1, {1: 0.9})])
    det.write_text(det.read_text() + "a_000,0045,0.1,0.1,0.4,oops,3,0.2\n")
    assert cli.main(["evaluate", "har", "--gt", str(gt), "--detections", str(det), "--label-map", str(lm),
                     "--json", str(tmp_path / "x.json")]) == 1
    err = capsys.readouterr().err
    assert f"{det}: not an AVA CSV: line 2:" in err and "oops" in err
    assert not (tmp_path / "x.json").exists()


def test_rows_of_actions_outside_the_label_map_are_counted(tmp_path):
    gt, det, lm = write_case(tmp_path, gt=[("a_000", 45, B1, 1, 1), ("a_000", 45, B1, 80, 1)],
                             det=[("a_000", 45, B1, {1: 0.9, 3: 0.1, 5: 0.1, 80: 0.9})])
    r = run((gt, det, lm))
    assert r["counts"]["gt_rows_outside_label_map"] == 1 and r["counts"]["detection_rows_outside_label_map"] == 1
    assert r["map"] == 1.0


def test_mmaction2_result_pickles_give_the_same_figures_as_the_csv(tmp_path):
    """A pickle as mmaction2 1.x's ``tools/test.py --dump`` writes it: ActionDataSample.to_dict(),
    moved to the CPU, dumped by mmengine (scores: background column, then the 3 classes)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("mmaction")
    from mmaction.structures import ActionDataSample
    from mmengine.evaluator.metric import _to_cpu
    from mmengine.fileio import dump
    from mmengine.structures import InstanceData

    dets = [("a_000", 45, [B1], [[0.0, 0.9, 0.1, 0.1]]), ("b_000", 10, [B3], [[0.0, 0.1, 0.9, 0.1]]),
            ("c_000", 20, [B4], [[0.0, 0.1, 0.1, 0.9]])]
    samples = []
    for clip, stamp, boxes, scores in dets:
        ds = ActionDataSample()
        ds.set_metainfo({"video_id": clip, "timestamp": stamp, "img_shape": (256, 340)})
        ds.pred_instances = InstanceData(bboxes=torch.tensor(boxes), scores=torch.tensor(scores))
        samples.append(ds.to_dict())
    dump(_to_cpu(samples), str(tmp_path / "results.pkl"))
    paths = write_case(
        tmp_path,
        gt=[("a_000", 45, B1, 1, 1), ("a_000", 45, B2, 3, 2), ("b_000", 10, B3, 3, 1), ("c_000", 20, B4, 5, 1)],
        det=[(c, s, b[0], dict(zip((1, 3, 5), sc[0][1:]))) for c, s, b, sc in dets])
    from_csv = run(paths)
    from_pickle = har.evaluate(paths[0], tmp_path / "results.pkl", paths[2])
    for key in ("map", "f1_macro", "recall_macro", "auroc_macro"):
        assert from_pickle[key] == pytest.approx(from_csv[key], abs=1e-6), key
    assert from_pickle["map"] == pytest.approx(2.5 / 3)
