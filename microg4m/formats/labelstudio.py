"""Label Studio: the labeling config, the tasks (one per clip, its persons' tracks as
predictions) and the reader of Label Studio's JSON export.

Config: the clip's video (``$video``, 30 fps), its persons as video rectangles (label
``person``) and, per region, the label map's actions as choices grouped by type: the poses
one choice (``pose``), the object manipulations and the person interactions several
(``object_manipulation``, ``person_interaction``).

A task: ``data`` = ``video`` (its URL), ``clip_id``, ``unit``, ``clip_type``; ``predictions``
= one result list (``model_version`` "microg4m tracks") with, per person, a
``videorectangle`` region whose id is ``person<id>`` (its keyframes: where Label Studio's
linear interpolation needs one to give the boxes back within 0.01 px, the AVA keyframe
always; frames 1-based, box in percent of the frame; ``enabled: false`` where a stretch
ends) and a ``choices`` result per group that has an action, under the same id.

The export (Label Studio's "JSON": a list of tasks with their ``annotations``) comes back
as ``(clip, person) -> action ids`` of each task's latest annotation that is not cancelled:
:func:`read_export`. A file that is not such an export, or a task without ``data.clip_id``
(another project's), raises :class:`LabelStudioError`.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from microg4m.common import faults
from microg4m.formats.action_attributes import GROUP_TITLES, POSE_TYPE, ActionAttributes
from microg4m.formats.cvat import keys_with, runs

FPS = 30
VIDEO, BOX, LABELS, PERSON = "video", "box", "person", "person"
GROUPS = {"PERSON_MOVEMENT": "pose", "OBJECT_MANIPULATION": "object_manipulation",
          "PERSON_INTERACTION": "person_interaction"}
MODEL_VERSION = "microg4m tracks"
REGION = re.compile(r"^person(\d+)$")


class LabelStudioError(ValueError):
    """A file that is not a usable Label Studio export; the message names it."""


def config_xml(attrs: ActionAttributes) -> str:
    """The labeling config."""
    view = ET.Element("View")
    ET.SubElement(view, "Header", {"value": "$clip_id"})
    ET.SubElement(view, "Video", {"name": VIDEO, "value": "$video", "framerate": f"{FPS}.0"})
    ET.SubElement(view, "VideoRectangle", {"name": BOX, "toName": VIDEO})
    labels = ET.SubElement(view, "Labels", {"name": LABELS, "toName": VIDEO})
    ET.SubElement(labels, "Label", {"value": PERSON})
    per_region = ET.SubElement(view, "View", {"visibleWhen": "region-selected"})
    for label_type, name in GROUPS.items():
        ids = attrs.group(label_type)
        if not ids:
            continue
        ET.SubElement(per_region, "Header", {"value": GROUP_TITLES[label_type]})
        choices = ET.SubElement(per_region, "Choices", {
            "name": name, "toName": VIDEO, "perRegion": "true",
            "choice": "single-radio" if label_type == POSE_TYPE else "multiple", "showInline": "true"})
        for i in ids:
            ET.SubElement(choices, "Choice", {"value": attrs.name_of[i]})
    ET.indent(view, space="  ")
    return ET.tostring(view, encoding="unicode") + "\n"


def _pct(v: float, size: int) -> float:
    return round(float(v) / size * 100.0, 6)


def sequence(frames: np.ndarray, boxes: np.ndarray, width: int, height: int, keyframe: int | None) -> list[dict]:
    """A person's ``videorectangle`` sequence: keyframes of each visible stretch, the AVA
    keyframe among them, ``enabled: false`` on the last frame of a stretch that ends early."""
    out = []
    for run in runs(frames):
        rf, rb = frames[run], np.round(boxes[run], 2)
        forced = [int(i) for i in np.flatnonzero(rf == keyframe)] if keyframe else []
        keys = keys_with(rb, forced)  # the same keyframes as the CVAT files'
        for k in keys:
            x1, y1, x2, y2 = rb[k]
            out.append({"frame": int(rf[k]), "enabled": True, "rotation": 0,
                        "x": _pct(x1, width), "y": _pct(y1, height),
                        "width": _pct(x2 - x1, width), "height": _pct(y2 - y1, height),
                        "time": round((int(rf[k]) - 1) / FPS, 6)})
        out[-1]["enabled"] = False  # the box ends after this frame (at the last stretch: the clip's end)
    return out


def person_results(pid: int, frames, boxes, ids, attrs: ActionAttributes, *, clip_frames: int, width: int,
                   height: int, keyframe: int | None) -> list[dict]:
    """A person's region and its choices, as prediction results."""
    region = f"person{pid}"
    out = [{"id": region, "type": "videorectangle", "from_name": BOX, "to_name": VIDEO, "origin": "prediction",
            "value": {"sequence": sequence(np.asarray(frames), np.asarray(boxes, float), width, height, keyframe),
                      "labels": [PERSON], "framesCount": clip_frames, "duration": clip_frames / FPS}}]
    for label_type, name in GROUPS.items():
        chosen = [attrs.name_of[i] for i in attrs.group(label_type) if i in set(ids)]
        if chosen:
            out.append({"id": region, "type": "choices", "from_name": name, "to_name": VIDEO,
                        "origin": "prediction", "value": {"choices": chosen}})
    return out


def task(clip_id: str, unit: str, clip_type: str, video_url: str, results: list[dict]) -> dict:
    return {"data": {VIDEO: video_url, "clip_id": clip_id, "unit": unit, "clip_type": clip_type},
            "predictions": [{"model_version": MODEL_VERSION, "result": results}]}


@dataclass
class ExportedTask:
    clip_id: str
    task_id: str
    persons: dict[int, list[int]]  # person -> action ids (label map order)
    refused: list[tuple[str, str]]  # (person or "", reason)


def _latest(annotations: list) -> dict | None:
    done = [a for a in annotations if isinstance(a, dict) and not a.get("was_cancelled")]
    if not done:
        return None
    return max(done, key=lambda a: (str(a.get("updated_at") or a.get("created_at") or ""), a.get("id") or 0))


def _persons(result: list, attrs: ActionAttributes) -> tuple[dict[int, list[int]], list[tuple[str, str]]]:
    names = {v: k for k, v in GROUPS.items()}
    regions: dict[str, dict[str, list[str]]] = {}
    refused = []
    for r in result:
        if not isinstance(r, dict):
            refused.append(("", f"a result that is not an object: {r!r}"))
            continue
        rid, kind, src = str(r.get("id", "")), r.get("type"), r.get("from_name")
        if kind == "videorectangle":
            regions.setdefault(rid, {})
        elif kind == "choices" and src in names:
            regions.setdefault(rid, {})[src] = list((r.get("value") or {}).get("choices") or [])
        else:
            refused.append((rid, f"a {kind!r} result from {src!r}: not of this project's labeling config"))
    out = {}
    for rid, chosen in regions.items():
        m = REGION.match(rid)
        if not m:
            refused.append((rid, f"region {rid!r} was drawn in Label Studio: only the tracked persons "
                                 "(person<id>) are read; draw new persons in CVAT"))
            continue
        poses = chosen.get(GROUPS[POSE_TYPE], [])
        ticked = [c for k, v in chosen.items() if k != GROUPS[POSE_TYPE] for c in v]
        try:
            out[int(m.group(1))] = attrs.ids(poses, ticked)
        except ValueError as exc:
            refused.append((m.group(1), str(exc)))
    return out, refused


def read_export(path, attrs: ActionAttributes) -> list[ExportedTask]:
    """The labelled tasks of a Label Studio JSON export (tasks without an annotation: none)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: never a bad input
        raise LabelStudioError(f"{path}: not a Label Studio JSON export ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, list):
        raise LabelStudioError(f"{path}: a Label Studio JSON export is a list of tasks, got {type(data).__name__}")
    out = []
    for n, t in enumerate(data):
        clip = (t.get("data") or {}).get("clip_id") if isinstance(t, dict) else None
        if not isinstance(clip, str) or "annotations" not in t:
            raise LabelStudioError(f"{path}: task {n} has no data.clip_id and annotations: not an export (JSON) "
                                   "of the tasks `microg4m labels export --to labelstudio` wrote; another project's?")
        chosen = _latest(t["annotations"] or [])
        if chosen is None:
            continue
        persons, refused = _persons(chosen.get("result") or [], attrs)
        out.append(ExportedTask(clip, str(t.get("id", n)), persons, refused))
    return out
