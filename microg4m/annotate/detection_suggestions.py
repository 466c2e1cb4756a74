"""Any action model's detections as suggestions on the labelling page.

The detections are an AVA detections CSV (``video_id, frame_stamp, x1, y1, x2, y2,
action_id, score``: what PySlowFast and ``microg4m evaluate har`` read, read here with the
same reader, :func:`microg4m.evaluate.har.read_detections`; boxes normalised, the stamp a
1-based frame of the clip). Each detected box is matched to the clip's persons by IoU with
their boxes at that frame (one to one, the highest IoU first, at least ``iou``); a matched
person is suggested the actions scored at least ``score`` (the highest first, one pose at
most, at most ``MAX_ACTIONS``). A person matched at several frames keeps the match with
the highest IoU. The suggestion's model is the file's name and its ``prompt_hash`` the
first 12 hex digits of the file's SHA-256 (which version of the detections it was).

Rows of clips the run does not know, boxes that match no person and actions outside the
page's label map give no suggestion and are named in the page's problems; the rest goes on.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from microg4m.common.boxes import iou_matrix
from microg4m.evaluate.har import LabelMap, read_detections
from microg4m.formats.labels import MAX_ACTIONS
from .suggestions import Suggestion

POSE_TYPE = "PERSON_MOVEMENT"


def match(det: np.ndarray, persons: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """One-to-one pairs ``(detection, person, IoU)``, the highest IoU first, IoU >= threshold."""
    m = iou_matrix(det, persons) if len(det) and len(persons) else np.zeros((len(det), len(persons)))
    pairs, used_d, used_p = [], set(), set()
    for d, p in zip(*np.unravel_index(np.argsort(-m, axis=None, kind="stable"), m.shape)):
        if m[d, p] < threshold:
            break
        if d not in used_d and p not in used_p:
            pairs.append((int(d), int(p), float(m[d, p])))
            used_d.add(d)
            used_p.add(p)
    return pairs


class DetectionSuggestions:
    """(clip, person) -> Suggestion from one detections CSV, read again when the file or the
    clips' tracks change."""

    def __init__(self, path, results, label_map, types: dict[int, str], *, score: float = 0.5, iou: float = 0.5):
        self.path = Path(path)
        self.results = results  # annotate.results.Results
        self.labels = label_map if isinstance(label_map, LabelMap) else LabelMap.read(label_map)
        self.types = types
        self.score, self.iou = float(score), float(iou)
        self._cache: tuple = (None, {}, [])

    def read(self) -> tuple[dict, list[str]]:
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino, self.results.index.view().token)
        except OSError as exc:
            return {}, [f"{self.path}: cannot read the detections ({exc}); no suggestions from them"]
        if stamp != self._cache[0]:
            self._cache = (stamp, *self._build())
        return self._cache[1], self._cache[2]

    def _build(self) -> tuple[dict, list[str]]:
        try:
            preds = read_detections(self.path, self.labels)
            digest = hashlib.sha256(self.path.read_bytes()).hexdigest()[:12]
        except (OSError, ValueError) as exc:
            return {}, [f"{exc}; no suggestions from it"]
        problems = []
        if preds.skipped:
            problems.append(f"{self.path}: {preds.skipped} row(s) of an action outside the page's label map; ignored")
        frames: dict[tuple[str, int], list[int]] = {}
        for i, key in enumerate(preds.keys):
            video, stamp = key.rsplit(",", 1)
            frames.setdefault((video, int(stamp)), []).append(i)
        index = self.results.index
        best: dict[tuple[str, int], tuple[float, int]] = {}
        unknown, unmatched = set(), 0
        for (video, stamp), rows in frames.items():
            clip = index.get(video)
            if clip is None or not clip.kept:
                unknown.add(video)
                continue
            tr = index.track_rows(video)
            here = tr[tr[:, 0] == stamp]
            scale = np.array([clip.width, clip.height, clip.width, clip.height], dtype=float)
            pairs = match(preds.boxes[rows], here[:, 2:6].astype(float) / scale, self.iou)
            unmatched += len(rows) - len(pairs)
            for d, p, v in pairs:
                key = (video, int(here[p, 1]))
                if key not in best or v > best[key][0]:
                    best[key] = (v, rows[d])
        if unknown:
            names = sorted(unknown)
            problems.append(f"{self.path}: detections of {len(names)} clip(s) that are no kept clip of "
                            f"{index.root} ({', '.join(names[:5])}{' ...' if len(names) > 5 else ''}); ignored")
        if unmatched:
            problems.append(f"{self.path}: {unmatched} detected box(es) match no tracked person (IoU < {self.iou})")
        found = {}
        for key, (_, row) in best.items():
            ids = self._actions(preds.scores[row])
            if ids:
                found[key] = Suggestion(self.path.name, digest, tuple(ids))
        return found, problems

    def _actions(self, scores: np.ndarray) -> list[int]:
        """The actions at or above the score threshold, the highest first; one pose, MAX_ACTIONS at most."""
        order = [j for j in np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")
                 if not np.isnan(scores[j]) and scores[j] >= self.score]
        out, pose = [], False
        for j in order:
            a = self.labels.ids[j]
            if self.types.get(a) == POSE_TYPE:
                if pose:
                    continue
                pose = True
            out.append(a)
        return out[:MAX_ACTIONS]


def from_config(results, label_map, lmap, detections: str | None, score: float = 0.5,
                iou_min: float = 0.5) -> DetectionSuggestions | None:
    """The page's detection suggestions (config ``annotate.detections``, ``annotate.detection_score``,
    ``annotate.detection_iou``; ``microg4m annotate --suggest``), or None without a file."""
    if not detections:
        return None
    types = dict(zip((int(i) for i in lmap["id"]), lmap["label_type"]))
    return DetectionSuggestions(detections, results, LabelMap.read(label_map), types, score=score, iou=iou_min)
