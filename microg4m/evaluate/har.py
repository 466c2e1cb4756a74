"""HAR metrics of the MicroG-4M benchmark, as the authors' patched PySlowFast computes them.

Their helper (``slowfast/utils/ava_eval_helper.py`` in lei-qi-233/MicroG-4M) reports:

* **mAP@0.5**: the AVA PASCAL evaluator (``ava_evaluation.object_detection_evaluation``
  of the TensorFlow object-detection API, which PySlowFast ships) over the label map's
  classes: per class, detections sorted by score, a detection is a true positive when it
  overlaps a not-yet-matched ground-truth box of that class in the same frame with IoU
  >= 0.5, VOC average precision; the mean over the classes that have ground truth.
* **F1, recall** (macro, scikit-learn, ``zero_division=0``): one row per predicted box
  and one column per class; predicted positive when the score >= 0.5; *true when the
  ground truth of the same frame (clip and stamp) holds that class on any box*: boxes are
  not matched. A class without any positive row counts as 0 in both means.
* **AUROC** (macro, scikit-learn): over the same rows, the mean over the classes whose
  truth column holds both values (0.0 when none does).

``matched=True`` is this project's departure (docs/evaluation.md): each frame's predicted
boxes are matched one to one to its ground-truth persons (Hungarian on IoU, pairs with
IoU >= 0.5); a row's truth is its matched person's actions (none when unmatched), and
each person left unmatched adds a row with its actions and no positive score, so a
missed person costs recall. mAP is already box-matched and is the same in both.

The evaluator is the one PySlowFast ships (``pyslowfast==1.0``, the same code as the
authors' copy); its ``metrics.py`` compares dtypes with ``np.float``, which NumPy 1.24
removed: :func:`_numpy_float` puts the alias back for the length of one evaluation.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from microg4m.common.atomic import write_csv, write_text
from microg4m.formats.ava import BOX, SPLIT_FILES, frame_key, read_ava
from microg4m.formats.labels import read_label_map

log = logging.getLogger(__name__)

IOU = 0.5
THRESHOLD = 0.5
PER_CLASS_COLUMNS = ["action_id", "ap50", "action_name", "gt_boxes"]  # the authors' three, and the boxes


@dataclass
class LabelMap:
    ids: list[int]
    names: list[str]

    @classmethod
    def read(cls, path) -> "LabelMap":
        df = read_label_map(path)
        return cls([int(i) for i in df["id"]], [str(n) for n in df["name"]])

    def categories(self) -> list[dict]:
        return [{"id": i, "name": n} for i, n in zip(self.ids, self.names)]


@dataclass
class Truth:
    """Ground-truth rows of the label map's classes: ``key, x1, y1, x2, y2, action_id``."""

    rows: pd.DataFrame
    skipped: int = 0  # rows of an action outside the label map (the helper's whitelist drops them)

    @classmethod
    def read(cls, path, labels: LabelMap) -> "Truth":
        df = read_ava(path, last="person_id")
        keep = df["action_id"].isin(labels.ids)
        df = df[keep].assign(key=[frame_key(v, s) for v, s in zip(df["video_id"][keep], df["stamp"][keep])])
        return cls(df.reset_index(drop=True), int((~keep).sum()))

    def by_key(self) -> dict[str, set[int]]:
        return {k: set(g) for k, g in self.rows.groupby("key", sort=False)["action_id"]}


@dataclass
class Predictions:
    """One row per predicted box: its frame key, box (x1, y1, x2, y2) and a score per
    label-map class (NaN where the file gave none)."""

    keys: list[str]
    boxes: np.ndarray
    scores: np.ndarray
    skipped: int = 0  # detection rows of an action outside the label map
    notes: list[str] = field(default_factory=list)

    @property
    def missing(self) -> int:
        return int(np.isnan(self.scores).sum())

    def filled(self) -> np.ndarray:
        """The scores with every missing one below all given ones (ranked last, never positive
        at a threshold above the lowest given score)."""
        s = self.scores.copy()
        given = s[~np.isnan(s)]
        floor = min(float(given.min()) - 1.0, -1.0) if given.size else -1.0
        s[np.isnan(s)] = floor
        return s


def read_detections(path, labels: LabelMap, *, classes: list[int] | None = None) -> Predictions:
    """Detections from PySlowFast's CSV (``video_id,stamp,x1,y1,x2,y2,action_id,score``) or
    mmaction2's result pickle (``tools/test.py --dump``), by the file's suffix."""
    if Path(path).suffix.lower() in (".pkl", ".pickle"):
        return _from_mmaction(path, labels, classes)
    return _from_csv(path, labels)


def _from_csv(path, labels: LabelMap) -> Predictions:
    """A box's rows share the frame and the box; its scores fill one vector. The same box
    given twice in a frame (two proposals) is two boxes: a row whose class the box already
    has starts the next one."""
    df = read_ava(path, last="score")
    col = {a: j for j, a in enumerate(labels.ids)}
    keep = df["action_id"].isin(col)
    skipped = int((~keep).sum())
    df = df[keep]
    keys, boxes, vectors = [], [], []
    open_boxes: dict[tuple, list[int]] = {}  # (key, box) -> indices of its boxes so far
    for v, s, x1, y1, x2, y2, a, score in zip(df["video_id"], df["stamp"], df["x1"], df["y1"], df["x2"],
                                              df["y2"], df["action_id"], df["score"]):
        key = frame_key(v, s)
        ident = (key, x1, y1, x2, y2)
        j = col[a]
        slots = open_boxes.setdefault(ident, [])
        target = next((i for i in slots if math.isnan(vectors[i][j])), None)
        if target is None:
            target = len(vectors)
            slots.append(target)
            keys.append(key)
            boxes.append((x1, y1, x2, y2))
            vectors.append(np.full(len(col), np.nan))
        vectors[target][j] = score
    scores = np.array(vectors) if vectors else np.zeros((0, len(col)))
    return Predictions(keys, np.array(boxes, dtype=float).reshape(-1, 4), scores, skipped)


def _from_mmaction(path, labels: LabelMap, classes: list[int] | None) -> Predictions:
    """mmaction2 1.x's dumped results: a list of dicts with ``video_id``, ``timestamp`` and
    ``pred_instances: {bboxes (n, 4), scores (n, C)}``; column 0 of the scores is the
    background. Columns 1..C-1 are ``classes`` (its config's ``custom_classes``), by default
    the label map's ids in ascending order (the config in docs/mmaction2 lists them so) when
    C-1 is their number, else the AVA ids 1..C-1 themselves."""
    try:
        import torch  # noqa: F401  (the pickle holds torch tensors)

        with open(path, "rb") as fh:
            samples = pickle.load(fh)
    except (OSError, pickle.UnpicklingError, EOFError, ImportError, AttributeError) as exc:
        raise ValueError(f"{path}: not a readable mmaction2 result pickle ({type(exc).__name__}: {exc})") from None
    if not isinstance(samples, list):
        raise ValueError(f"{path}: expected a list of results (mmaction2 tools/test.py --dump), got {type(samples)}")
    col = {a: j for j, a in enumerate(labels.ids)}
    keys, boxes, vectors, skipped = [], [], [], 0
    for n, sample in enumerate(samples):
        try:
            pred = sample["pred_instances"]
            bb = np.asarray(_numpy(pred["bboxes"]), dtype=float).reshape(-1, 4)
            sc = np.asarray(_numpy(pred["scores"]), dtype=float)
            key = frame_key(sample["video_id"], sample["timestamp"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: result {n} is not an AVA detection result ({type(exc).__name__}: {exc})") \
                from None
        if sc.ndim != 2 or sc.shape[0] != bb.shape[0]:
            raise ValueError(f"{path}: result {n}: scores {sc.shape} do not match boxes {bb.shape}")
        order = classes or (sorted(labels.ids) if sc.shape[1] - 1 == len(labels.ids) else
                            list(range(1, sc.shape[1])))
        if len(order) != sc.shape[1] - 1:
            raise ValueError(f"{path}: result {n}: {sc.shape[1]} score columns, expected background + "
                             f"{len(order)} classes")
        skipped += sum(a not in col for a in order) * sc.shape[0]
        for box, row in zip(bb, sc):
            vec = np.full(len(col), np.nan)
            for a, s in zip(order, row[1:]):
                if a in col:
                    vec[col[a]] = s
            keys.append(key)
            boxes.append(box)
            vectors.append(vec)
    scores = np.array(vectors) if vectors else np.zeros((0, len(col)))
    return Predictions(keys, np.array(boxes, dtype=float).reshape(-1, 4), scores, skipped)


def _numpy(value):
    return value.numpy() if hasattr(value, "numpy") else value


# ---------------------------------------------------------------- mAP (PySlowFast's evaluator)


@contextlib.contextmanager
def _numpy_float():
    """``np.float`` for pyslowfast 1.0's dtype checks (removed from NumPy in 1.24)."""
    added = "float" not in np.__dict__
    if added:
        np.float = float
    try:
        yield
    finally:
        if added:
            del np.float


def _yxyx(boxes) -> np.ndarray:
    return np.asarray(boxes, dtype=float).reshape(-1, 4)[:, [1, 0, 3, 2]]


@dataclass
class MapResult:
    ap: np.ndarray  # per label-map class, NaN where the truth has none
    ap_range: np.ndarray  # (classes, 2): the AP when tied scores put the false (true) positives first
    gt_boxes: np.ndarray  # ground-truth boxes per class

    @property
    def tie_range(self) -> tuple[float, float]:
        """The mAP's range over the orders of tied scores (the evaluator takes one of them)."""
        ok = np.isfinite(self.ap_range[:, 0])
        return ((float(self.ap_range[ok, 0].mean()), float(self.ap_range[ok, 1].mean())) if ok.any()
                else (float("nan"), float("nan")))

    @property
    def map(self) -> float:
        return float(np.nanmean(self.ap)) if np.isfinite(self.ap).any() else float("nan")


def ava_map(truth: Truth, preds: Predictions, labels: LabelMap) -> MapResult:
    """mAP@0.5 as the helper's ``run_evaluation``: ground truth per frame, every (box, class,
    score) of the predictions as a detection."""
    from slowfast.utils.ava_evaluation import metrics, object_detection_evaluation

    ev = object_detection_evaluation.ObjectDetectionEvaluation(
        num_groundtruth_classes=max(labels.ids), matching_iou_threshold=IOU, label_id_offset=1)
    for key, g in truth.rows.groupby("key", sort=False):
        ev.add_single_ground_truth_image_info(key, _yxyx(g[BOX].to_numpy()), g["action_id"].to_numpy() - 1,
                                              np.zeros(len(g), dtype=bool))
    ids = np.array(labels.ids)
    per_key: dict[str, list] = {}
    for i, key in enumerate(preds.keys):
        per_key.setdefault(key, []).append(i)
    for key, rows in per_key.items():
        s = preds.scores[rows]
        r, c = np.nonzero(~np.isnan(s))  # box-major, classes in label-map order, as the helper writes them
        ev.add_single_detected_image_info(key, _yxyx(preds.boxes[rows][r]), s[r, c], ids[c] - 1)
    with _numpy_float(), _quiet():
        result = ev.evaluate()
    ap = np.array([result.average_precisions[i - 1] for i in labels.ids], dtype=float)
    ranges = np.full((len(labels.ids), 2), np.nan)
    with _numpy_float():
        for c, i in enumerate(labels.ids):
            n_gt = ev.num_gt_instances_per_class[i - 1]
            if n_gt == 0:
                continue
            s = np.concatenate(ev.scores_per_class[i - 1]) if ev.scores_per_class[i - 1] else np.zeros(0)
            tp = (np.concatenate(ev.tp_fp_labels_per_class[i - 1]) if ev.tp_fp_labels_per_class[i - 1]
                  else np.zeros(0, dtype=bool))
            for side, tp_first in enumerate((False, True)):
                key = tp.astype(int)
                order = np.lexsort((-key if tp_first else key, -s))  # score down; ties: TPs last or first
                rank = np.empty(len(s))
                rank[order] = -np.arange(len(s), dtype=float)
                p, r = metrics.compute_precision_recall(rank, tp, n_gt)
                ranges[c, side] = metrics.compute_average_precision(p, r)
    gt = np.array([ev.num_gt_instances_per_class[i - 1] for i in labels.ids])
    return MapResult(ap, ranges, gt)


@contextlib.contextmanager
def _quiet():
    """The evaluator logs through the root logger (a line per class without ground truth)."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        root.setLevel(level)


# ---------------------------------------------------------------- F1, recall, AUROC


def frame_truth(truth: Truth, preds: Predictions, n_classes: int, col: dict[int, int]) -> np.ndarray:
    """The helper's truth matrix: row i holds the classes of the frame of predicted box i."""
    sets = truth.by_key()
    y = np.zeros((len(preds.keys), n_classes), dtype=int)
    for i, key in enumerate(preds.keys):
        for a in sets.get(key, ()):
            y[i, col[a]] = 1
    return y


def matched_truth(truth: Truth, preds: Predictions, n_classes: int, col: dict[int, int]):
    """The box-matched rows: (truth, scores) with a row per predicted box and one per missed person."""
    from scipy.optimize import linear_sum_assignment
    from slowfast.utils.ava_evaluation.np_box_ops import iou

    scores = preds.filled()
    floor = scores.min() - 1.0 if scores.size else -1.0  # below every score: never positive, ranked last
    persons: dict[str, list[tuple[tuple, set]]] = {}
    for key, g in truth.rows.groupby("key", sort=False):
        boxes = {}
        for box, a in zip(map(tuple, g[BOX].to_numpy()), g["action_id"]):
            boxes.setdefault(box, set()).add(int(a))
        persons[key] = list(boxes.items())
    y = np.zeros((len(preds.keys), n_classes), dtype=int)
    extra_y, per_key = [], {}
    for i, key in enumerate(preds.keys):
        per_key.setdefault(key, []).append(i)
    for key, people in persons.items():
        rows = per_key.get(key, [])
        matched = set()
        if rows:
            overlap = iou(_yxyx(preds.boxes[rows]), _yxyx([p[0] for p in people]))
            for r, c in zip(*linear_sum_assignment(-overlap)):
                if overlap[r, c] >= IOU:
                    matched.add(c)
                    for a in people[c][1]:
                        y[rows[r], col[a]] = 1
        for c, (_, actions) in enumerate(people):
            if c not in matched:
                row = np.zeros(n_classes, dtype=int)
                row[[col[a] for a in actions]] = 1
                extra_y.append(row)
    if extra_y:
        y = np.vstack([y, np.array(extra_y)])
        scores = np.vstack([scores, np.full((len(extra_y), n_classes), floor)])
    return y, scores, len(extra_y)


def classification(y_true: np.ndarray, y_score: np.ndarray, threshold: float = THRESHOLD) -> dict:
    """The helper's macro F1, recall and AUROC."""
    from sklearn.metrics import f1_score, recall_score, roc_auc_score

    if not len(y_true):
        return {"f1_macro": 0.0, "recall_macro": 0.0, "auroc_macro": 0.0, "auroc_classes": 0}
    y_pred = (y_score >= threshold).astype(int)
    f1 = f1_score(y_true, y_pred, average="macro", zero_division=0)
    recall = recall_score(y_true, y_pred, average="macro", zero_division=0)
    both = [c for c in range(y_true.shape[1]) if 0 < y_true[:, c].sum() < len(y_true)]
    auroc = roc_auc_score(y_true[:, both], y_score[:, both], average="macro") if both else 0.0
    return {"f1_macro": float(f1), "recall_macro": float(recall), "auroc_macro": float(auroc),
            "auroc_classes": len(both)}


def threshold_sweep(y_true: np.ndarray, y_score: np.ndarray, labels: LabelMap,
                    threshold: float = THRESHOLD) -> pd.DataFrame:
    """Per class: precision, recall and F1 at the protocol's threshold, and the threshold
    among the class's own scores that gives the best F1 (scikit-learn's precision-recall
    curve: every distinct score is tried), with its precision, recall and F1."""
    from sklearn.metrics import precision_recall_curve

    rows = []
    for c, (a, name) in enumerate(zip(labels.ids, labels.names)):
        t, s = y_true[:, c], y_score[:, c]
        pred = s >= threshold
        tp = int((pred & (t == 1)).sum())
        p_at = tp / pred.sum() if pred.sum() else 0.0
        r_at = tp / t.sum() if t.sum() else 0.0
        f_at = 2 * p_at * r_at / (p_at + r_at) if p_at + r_at else 0.0
        best = (float("nan"), 0.0, 0.0, 0.0)
        if t.sum():
            prec, rec, thr = precision_recall_curve(t, s)
            f = np.divide(2 * prec * rec, prec + rec, out=np.zeros_like(prec), where=(prec + rec) > 0)[:-1]
            k = int(np.argmax(f))
            best = (float(thr[k]), float(prec[k]), float(rec[k]), float(f[k]))
        rows.append((a, name, int(t.sum()), len(t), p_at, r_at, f_at, *best))
    return pd.DataFrame(rows, columns=["action_id", "action_name", "positives", "rows", "precision", "recall", "f1",
                                       "best_threshold", "best_precision", "best_recall", "best_f1"])


# ---------------------------------------------------------------- the whole evaluation


def evaluate(gt, detections, label_map, *, matched: bool = False, threshold: float = THRESHOLD,
             classes: list[int] | None = None, predictions: Predictions | None = None) -> dict:
    """Every figure of the protocol for one detections file (or ``predictions`` already read)."""
    labels = LabelMap.read(label_map)
    truth = Truth.read(gt, labels)
    preds = predictions if predictions is not None else read_detections(detections, labels, classes=classes)
    col = {a: j for j, a in enumerate(labels.ids)}
    m = ava_map(truth, preds, labels)
    if matched:
        y_true, y_score, missed = matched_truth(truth, preds, len(labels.ids), col)
    else:
        y_true, y_score, missed = frame_truth(truth, preds, len(labels.ids), col), preds.filled(), None
    figures = classification(y_true, y_score, threshold)
    sweep = threshold_sweep(y_true, y_score, labels, threshold)
    tuned = sweep["best_f1"].mean() if len(sweep) else 0.0
    truth_keys = set(truth.rows["key"])
    result = {
        "protocol": "matched" if matched else "frame",
        "map": m.map,
        "f1_macro": figures["f1_macro"],
        "recall_macro": figures["recall_macro"],
        "auroc_macro": figures["auroc_macro"],
        "threshold": threshold,
        "map_tie_range": list(m.tie_range),
        "f1_macro_best_thresholds": float(tuned),
        "ap_per_class": {str(a): {"name": n, "ap": float(ap), "ap_tie_range": [float(lo), float(hi)],
                                  "gt_boxes": int(g)}
                         for a, n, ap, (lo, hi), g in zip(labels.ids, labels.names, m.ap, m.ap_range, m.gt_boxes)},
        "counts": {
            "gt_rows": len(truth.rows), "gt_frames": len(truth_keys), "gt_rows_outside_label_map": truth.skipped,
            "classes": len(labels.ids), "classes_with_gt": int(np.isfinite(m.ap).sum()),
            "auroc_classes": figures["auroc_classes"],
            "predicted_boxes": len(preds.keys), "predicted_frames": len(set(preds.keys)),
            "predicted_frames_without_gt": len(set(preds.keys) - truth_keys),
            "gt_frames_without_prediction": len(truth_keys - set(preds.keys)),
            "detection_rows_outside_label_map": preds.skipped, "missing_scores": preds.missing,
        },
        "inputs": {"gt": str(gt), "detections": str(detections), "label_map": str(label_map)},
    }
    if missed is not None:
        result["counts"]["missed_persons"] = missed
    result["_sweep"] = sweep
    return result


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def per_class_table(result: dict) -> pd.DataFrame:
    """``action_id, ap50, action_name, gt_boxes``: the authors' ``ap_per_class_*.csv`` columns
    (AP with 5 decimals, ``nan`` for a class without ground truth) and the box count."""
    rows = [(int(a), "nan" if not math.isfinite(v["ap"]) else f"{v['ap']:.5f}", v["name"], v["gt_boxes"])
            for a, v in result["ap_per_class"].items()]
    return pd.DataFrame(rows, columns=PER_CLASS_COLUMNS)


def write(result: dict, *, json_path=None, per_class=None, sweep=None) -> dict:
    """Write the JSON (NaN as null), the per-class AP CSV and the threshold sweep CSV; return
    the JSON's content."""
    doc = _clean({k: v for k, v in result.items() if not k.startswith("_")})
    if json_path:
        write_text(json_path, json.dumps(doc, indent=2) + "\n")
    if per_class:
        write_csv(per_class, per_class_table(result))
    if sweep:
        write_csv(sweep, result["_sweep"], float_format="%.5f")
    return doc


def default_paths(results: str | os.PathLike, split: str) -> dict:
    """The export's ground truth of ``split`` and its label map."""
    export = Path(results) / "export"
    return {"gt": export / SPLIT_FILES[split], "label_map": export / "label_map.pbtxt"}
