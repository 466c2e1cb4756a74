"""CVAT for video 1.1 XML: one file per clip (a CVAT task holds one video), one
``<track>`` per person; and reading a CVAT export back into per-frame boxes.

CVAT numbers the frames of a task from 0, so CVAT frame ``f`` is our frame ``f + 1``.
CVAT keeps a track's *keyframes* and computes every other frame itself: a box is
interpolated linearly between two keyframes, a shape with ``outside="1"`` ends a visible
stretch, and on import a frame missing from a visible stretch ends it too (CVAT's
``import_dm_annotations``/``TrackManager.get_interpolated_shapes``).

Writing: the keyframes of a person are the frames where CVAT's interpolation needs one
to reproduce the recorded boxes within the 0.01 px the tracks are written with. For
the reference's ``hold`` boxes these are each refresh and the last frame it is held
(so CVAT shows the boxes as recorded, not sliding between refreshes); for
``interpolate`` boxes the refreshes. As CVAT's own export does, every frame of a visible
stretch is written, the frames between keyframes with ``keyframe="0"`` and the values
CVAT computes, and an ``outside="1"`` keyframe follows a stretch that ends before the
clip does. The person id travels as the immutable track attribute ``person_id`` of the
label ``person``; the task's video is the clip's mp4 (``<source>``).

Reading mirrors CVAT's import: per track the keyframes, the first shape of each visible
stretch and the outside shapes count; the frames between are interpolated as above.
Anything that is not such a file (not XML, CVAT for images, another label or shape,
frames outside the task, a broken box) raises :class:`CvatError` naming the file and
the reason.
"""

from __future__ import annotations

import io
import os
import zipfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from microg4m.common import faults
from microg4m.common.atomic import atomic_path
from microg4m.formats.action_attributes import NO_POSE, POSE, ActionAttributes

LABEL = "person"
ATTRIBUTE = "person_id"
TOL = 0.01 + 1e-6  # the tracks' precision: 2 decimals


class CvatError(ValueError):
    """A file that is not a usable CVAT for video 1.1 export; the message names it."""


@dataclass
class CvatClip:
    """What a CVAT for video file holds: the task's video and its persons' boxes."""

    clip_id: str
    size: int  # frames of the task
    width: int | None
    height: int | None
    # one entry per <track>: (person_id or None for a track without one, {frame (1-based): box})
    tracks: list[tuple[int | None, dict[int, tuple[float, float, float, float]]]] = field(default_factory=list)
    # per <track> (the same order): frame (1-based) -> its other attributes as CVAT shows them
    # there (those of the last keyframe at or before it): name -> the values given (a list:
    # a hand-edited file may repeat one)
    attributes: list[dict[int, dict[str, list[str]]]] = field(default_factory=list)
    track_ids: list[str] = field(default_factory=list)  # each track's id in the file (for reports)


# ---------------------------------------------------------------- keyframes (pure)


def runs(frames: np.ndarray) -> list[slice]:
    """Consecutive stretches of a sorted frame array, as slices into it."""
    cuts = np.flatnonzero(np.diff(frames) != 1) + 1
    bounds = [0, *cuts.tolist(), len(frames)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def interpolate(f0: int, b0: np.ndarray, f1: int, b1: np.ndarray, frames) -> np.ndarray:
    """CVAT's rectangle interpolation: ``b0 + (b1 - b0) * (f - f0) / (f1 - f0)``."""
    offset = (np.asarray(frames, dtype=float) - f0) / (f1 - f0)
    return b0 + (b1 - b0) * offset[:, None]


def keyframe_indices(boxes: np.ndarray, tol: float = TOL) -> list[int]:
    """Indices of the keyframes of one visible stretch (consecutive frames, rows ``x1,y1,x2,y2``).

    Greedy: from each keyframe, the next is the farthest frame such that interpolating
    between the two reproduces every frame in between within ``tol``. The first and the
    last frame are keyframes.
    """
    n = len(boxes)
    keys = [0]
    a = 0
    while a < n - 1:
        b = a + 1
        while b + 1 < n:
            mid = np.arange(a + 1, b + 1)
            if np.abs(interpolate(a, boxes[a], b + 1, boxes[b + 1], mid) - boxes[mid]).max() > tol:
                break
            b += 1
        keys.append(b)
        a = b
    return keys


# ---------------------------------------------------------------- writing


def _fmt(v: float) -> str:
    return f"{v:.2f}"


def _sub(parent: ET.Element, tag: str, text: str | None = None) -> ET.Element:
    el = ET.SubElement(parent, tag)
    if text is not None:
        el.text = text
    return el


PERSON_ID_SPEC = {"name": ATTRIBUTE, "mutable": False, "input_type": "number", "default_value": "0",
                  "values": ["0", "1000000", "1"]}
AVA_KEYFRAME = "ava_keyframe"
MAX_FRAMES = 10_000_000  # the largest task frame the ava_keyframe attribute takes


def label_spec(actions: ActionAttributes | None = None) -> list[dict]:
    """CVAT's raw label specification (the task's labels; ``cvat-cli task create --labels``):
    the rectangle label ``person`` with the immutable ``person_id``; with ``actions`` also the
    immutable ``ava_keyframe`` (the task frame of the person's AVA keyframe), the mutable
    one-choice ``pose`` and a mutable checkbox per other action, type by type."""
    attrs = [dict(PERSON_ID_SPEC)]
    if actions is not None:
        attrs.append({"name": AVA_KEYFRAME, "mutable": False, "input_type": "number", "default_value": "0",
                      "values": ["0", str(MAX_FRAMES), "1"]})
        attrs.append({"name": POSE, "mutable": True, "input_type": "select", "default_value": NO_POSE,
                      "values": [NO_POSE, *(actions.name_of[i] for i in actions.poses)]})
        attrs += [{"name": actions.name_of[i], "mutable": True, "input_type": "checkbox", "default_value": "false",
                   "values": ["false"]} for i in actions.several]
    return [{"name": LABEL, "type": "rectangle", "attributes": attrs}]


def _meta(root: ET.Element, name: str, size: int, width: int | None, height: int | None, *,
          source: str | None, spec: list[dict]) -> None:
    """The task's meta: a video task (``source``: its file; mode interpolation) or an image task."""
    task = _sub(_sub(root, "meta"), "task")
    for tag, text in (("name", name), ("size", str(size)), ("mode", "interpolation" if source else "annotation"),
                      ("overlap", "0"), ("start_frame", "0"), ("stop_frame", str(size - 1)), ("frame_filter", "")):
        _sub(task, tag, text)
    labels = _sub(task, "labels")
    for lab in spec:
        label = _sub(labels, "label")
        _sub(label, "name", lab["name"])
        _sub(label, "type", lab["type"])
        attrs = _sub(label, "attributes")
        for a in lab["attributes"]:
            attr = _sub(attrs, "attribute")
            for tag, text in (("name", a["name"]), ("mutable", str(a["mutable"])), ("input_type", a["input_type"]),
                              ("default_value", a["default_value"]), ("values", "\n".join(a["values"]))):
                _sub(attr, tag, text)
    if width is not None:
        orig = _sub(task, "original_size")
        _sub(orig, "width", str(width))
        _sub(orig, "height", str(height))
    if source:
        _sub(task, "source", source)


def _box(track: ET.Element, frame0: int, box, *, keyframe: bool, outside: bool, attributes: dict) -> None:
    el = ET.SubElement(track, "box", {
        "frame": str(frame0), "outside": str(int(outside)), "occluded": "0", "keyframe": str(int(keyframe)),
        "xtl": _fmt(box[0]), "ytl": _fmt(box[1]), "xbr": _fmt(box[2]), "ybr": _fmt(box[3]), "z_order": "0",
    })
    for name, value in attributes.items():
        _sub(el, "attribute", value).set("name", name)


@dataclass
class TrackOut:
    """One person's track as written: its boxes (frames 1-based within its clip, pixels),
    where its clip starts in the task (``offset``: task frame of the clip's frame 1) and how
    long the clip is; with actions, the AVA keyframe (a clip frame, always written as a
    keyframe) and the action attributes written on every keyframe."""

    person_id: int
    frames: np.ndarray
    boxes: np.ndarray
    clip_frames: int
    offset: int = 0
    ava_keyframe: int | None = None
    actions: dict[str, str] | None = None


def keys_with(boxes: np.ndarray, forced: list[int]) -> list[int]:
    """Keyframe indices of one stretch with the indices ``forced`` among them: the stretch is
    cut there and each piece gets its own keyframes, so the boxes stay exact."""
    cuts = sorted({0, len(boxes) - 1, *forced})
    keys: list[int] = []
    for a, b in zip(cuts, cuts[1:] or [cuts[0]]):
        part = keyframe_indices(boxes[a:b + 1]) if b > a else [0]
        keys += [a + k for k in part if not keys or a + k > keys[-1]]
    return keys


def _write_track(root: ET.Element, idx: int, t: TrackOut, task_size: int) -> None:
    order = np.argsort(t.frames, kind="stable")
    fr, boxes = np.asarray(t.frames)[order].astype(int), np.asarray(t.boxes, dtype=float)[order]
    track = ET.SubElement(root, "track", {"id": str(idx), "label": LABEL})
    plain = {ATTRIBUTE: str(t.person_id)}
    keyed = dict(plain)
    if t.actions is not None:
        keyed[AVA_KEYFRAME] = str(t.offset + (t.ava_keyframe or 1) - 1)
        keyed.update(t.actions)
        plain[AVA_KEYFRAME] = keyed[AVA_KEYFRAME]
    for run in runs(fr):
        rf, rb = fr[run], np.round(boxes[run], 2)
        forced = [int(i) for i in np.flatnonzero(rf == t.ava_keyframe)] if t.ava_keyframe else []
        keys = keys_with(rb, forced)
        for k0, k1 in zip(keys, keys[1:] + [None]):
            _box(track, t.offset + rf[k0] - 1, rb[k0], keyframe=True, outside=False, attributes=keyed)
            if k1 is not None and k1 > k0 + 1:
                mid = np.arange(k0 + 1, k1)
                for i, b in zip(mid, interpolate(k0, rb[k0], k1, rb[k1], mid)):
                    _box(track, t.offset + rf[i] - 1, b, keyframe=False, outside=False, attributes=plain)
        # the stretch ends before the clip does, or the clip before the task does
        if rf[-1] < t.clip_frames or t.offset + rf[-1] < task_size:
            _box(track, t.offset + rf[-1], rb[-1], keyframe=True, outside=True, attributes=keyed)


def task_xml(name: str, size: int, tracks: list[TrackOut], *, width: int | None = None, height: int | None = None,
             source: str | None = None, actions: ActionAttributes | None = None) -> bytes:
    """The CVAT for video 1.1 XML of a task of ``size`` frames: a video task (``source``: its
    file) or an image task of several clips; tracks in the order given."""
    root = ET.Element("annotations")
    _sub(root, "version", "1.1")
    _meta(root, name, size, width, height, source=source, spec=label_spec(actions))
    for idx, t in enumerate(tracks):
        _write_track(root, idx, t, size)
    ET.indent(root, space="  ")
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode").encode() + b"\n"


def person_tracks(rows) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``rows`` ``(frame_id, person_id, x1, y1, x2, y2)`` as person -> (frames, boxes), in id order."""
    by_person: dict[int, list] = {}
    for f, p, *box in rows:
        by_person.setdefault(int(p), []).append((int(f), *map(float, box)))
    out = {}
    for pid in sorted(by_person):
        data = np.array(sorted(by_person[pid]), dtype=float)
        out[pid] = (data[:, 0].astype(int), data[:, 1:])
    return out


def clip_xml(clip_id: str, rows, *, frames: int, width: int, height: int) -> bytes:
    """The CVAT for video 1.1 XML of one clip's video task. ``rows``: ``(frame_id, person_id,
    x1, y1, x2, y2)`` (frame 1-based, pixels), any order; persons are written in id order."""
    tracks = [TrackOut(pid, f, b, frames) for pid, (f, b) in person_tracks(rows).items()]
    return task_xml(clip_id, frames, tracks, width=width, height=height, source=f"{clip_id}.mp4")


def write_clip(path: str | os.PathLike, clip_id: str, rows, *, frames: int, width: int, height: int) -> None:
    data = clip_xml(clip_id, rows, frames=frames, width=width, height=height)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


# ---------------------------------------------------------------- reading


def load_bytes(path: str | os.PathLike) -> bytes:
    """The XML of a correction file: an ``.xml``, or CVAT's export ``.zip`` (its ``annotations.xml``)."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".zip":
            with zipfile.ZipFile(path) as z:
                names = [n for n in z.namelist() if Path(n).name == "annotations.xml"]
                if len(names) != 1:
                    raise CvatError(f"{path}: a CVAT export zip holds one annotations.xml, found {len(names)}")
                return z.read(names[0])
        return path.read_bytes()
    except (OSError, zipfile.BadZipFile) as exc:
        faults.check(exc, path)  # no space, EIO, EACCES ...: never a bad input
        raise CvatError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from None


def _parse(path, data: bytes) -> ET.Element:
    try:
        root = ET.parse(io.BytesIO(data)).getroot()
    except ET.ParseError as exc:
        raise CvatError(f"{path}: not XML ({exc})") from None
    if root.tag != "annotations":
        raise CvatError(f"{path}: not a CVAT XML (root element <{root.tag}>, expected <annotations>)")
    return root


def _task(path, root: ET.Element) -> ET.Element:
    task = root.find("meta/task")
    if task is None:
        what = "a job export" if root.find("meta/job") is not None else "no <meta><task>"
        raise CvatError(f"{path}: {what}; export the whole task as 'CVAT for video 1.1'")
    mode = (task.findtext("mode") or "").strip()
    # an image task exported as 'CVAT for video 1.1' says mode annotation and holds tracks, no <image>
    if mode not in ("interpolation", "annotation") or root.find("image") is not None:
        raise CvatError(f"{path}: a 'CVAT for images' file (mode {mode!r}); export the task as 'CVAT for video 1.1'")
    return task


def clip_of(root: ET.Element, path="") -> str:
    """The clip a CVAT for video file is about: its video's file name (``<source>``, which
    CVAT writes for a video task), else the task's name."""
    task = _task(path, root)
    source = (task.findtext("source") or "").strip()
    name = Path(source).stem if source else (task.findtext("name") or "").strip()
    if not name:
        raise CvatError(f"{path}: names no video (<source>) and no task name")
    return name


def peek_clip(path: str | os.PathLike) -> str:
    """The clip of a correction file, from its meta only (for the workflow's DAG)."""
    return clip_of(_parse(path, load_bytes(path)), path)


def _person_id(text: str | None) -> int | None:
    """A ``person_id`` attribute value: CVAT stores a number attribute as it parsed it
    (``1.0`` for ``1``); 0 (a new track's default), empty or other text means none."""
    try:
        v = float((text or "").strip())
    except ValueError:
        return None
    return int(v) if v.is_integer() and v > 0 else None


def _int(path, el: ET.Element, key: str) -> int:
    try:
        return int(el.attrib[key])
    except (KeyError, ValueError):
        raise CvatError(f"{path}: <{el.tag}> without an integer {key!r} ({el.attrib})") from None


def _import_shapes(shapes: list, size: int) -> list:
    """CVAT's import of one track's shapes (sorted by frame): the keyframes, the shapes where
    it turns visible or hidden, and an ``outside`` shape after each gap and after the last
    shape when it ends before the task does (``_validate_track_shapes``)."""
    kept, prev = [], None
    for s in shapes:
        prev_visible = prev is not None and not prev["outside"]
        visible = not s["outside"]
        gap = prev_visible and prev["frame"] + 1 < s["frame"]
        if gap:
            prev = dict(prev, frame=prev["frame"] + 1, outside=True, keyframe=True)
            kept.append(prev)
        if prev_visible != visible or (visible and (gap or s["keyframe"])):
            kept.append(dict(s, keyframe=True))
        prev = s
    if prev is not None and not prev["outside"] and prev["frame"] + 1 <= size - 1:
        kept.append(dict(prev, frame=prev["frame"] + 1, outside=True, keyframe=True))
    return kept


def _frames_of(kept: list, size: int) -> tuple[dict[int, tuple], dict[int, dict]]:
    """Per-frame boxes (1-based frames) of imported shapes, as CVAT interpolates them, and
    per frame the attributes of the shape it comes from (mutable attributes hold until the
    next keyframe)."""
    boxes: dict[int, tuple] = {}
    attrs: dict[int, dict] = {}
    for s0, s1 in zip(kept, kept[1:] + [None]):
        if s0["outside"]:
            continue
        boxes[s0["frame"] + 1] = tuple(s0["box"])
        attrs[s0["frame"] + 1] = s0["attrs"]
        end, nxt = (s1["frame"], s1["box"]) if s1 is not None else (size, s0["box"])  # held to the end
        mid = np.arange(s0["frame"] + 1, end)
        if len(mid):
            for f, b in zip(mid, interpolate(s0["frame"], s0["box"], end, nxt, mid)):
                boxes[int(f) + 1] = tuple(b)
                attrs[int(f) + 1] = s0["attrs"]
    return boxes, attrs


def read(path: str | os.PathLike) -> CvatClip:
    """Per-frame boxes of every track of a CVAT for video 1.1 file (see the module docstring)."""
    root = _parse(path, load_bytes(path))
    task = _task(path, root)
    clip = clip_of(root, path)
    w = task.findtext("original_size/width")
    h = task.findtext("original_size/height")
    try:
        size = int(task.findtext("size") or "")
        start = int(task.findtext("start_frame") or 0)
        width, height = (int(w), int(h)) if w and h else (None, None)
    except ValueError:
        raise CvatError(f"{path}: the task's <size>, <start_frame> or <original_size> is not an integer") from None
    if start != 0:
        raise CvatError(f"{path}: the task starts at frame {start}; create it from the whole clip")
    out = CvatClip(clip, size, width, height)
    extra = sorted({el.tag for el in root if el.tag not in ("version", "meta", "track", "tag")})
    if extra:
        raise CvatError(f"{path}: unexpected element(s) {', '.join('<' + t + '>' for t in extra)}")
    for no, track in enumerate(root.iter("track")):
        label = track.get("label")
        if label != LABEL:
            raise CvatError(f"{path}: track {track.get('id', no)} has label {label!r}; only {LABEL!r} tracks are read")
        shapes, pid = [], None
        for el in track:
            if el.tag == "attribute":  # a track-level attribute (some writers): as if on every shape
                continue
            if el.tag != "box":
                raise CvatError(f"{path}: track {track.get('id', no)} holds a <{el.tag}>; only boxes are read")
            frame = _int(path, el, "frame")
            if not 0 <= frame < size:
                raise CvatError(f"{path}: track {track.get('id', no)}: frame {frame} outside the task (0..{size - 1})")
            try:
                box = tuple(float(el.attrib[k]) for k in ("xtl", "ytl", "xbr", "ybr"))
            except (KeyError, ValueError):
                raise CvatError(f"{path}: track {track.get('id', no)}, frame {frame}: box without "
                                "numeric xtl/ytl/xbr/ybr") from None
            outside = el.get("outside", "0") == "1"
            if not outside and not (box[0] < box[2] and box[1] < box[3]):
                raise CvatError(f"{path}: track {track.get('id', no)}, frame {frame}: empty box {box}")
            attrs: dict[str, list[str]] = {}
            for a in el.iter("attribute"):
                if a.get("name") == ATTRIBUTE:
                    pid = _person_id(a.text) or pid
                else:
                    attrs.setdefault(a.get("name", ""), []).append((a.text or "").strip())
            shapes.append(dict(frame=frame, box=np.array(box), outside=outside,
                               keyframe=el.get("keyframe", "1") == "1", attrs=attrs))
        shapes.sort(key=lambda s: s["frame"])
        if len({s["frame"] for s in shapes}) != len(shapes):
            raise CvatError(f"{path}: track {track.get('id', no)} has two boxes on one frame")
        whole = {a.get("name", ""): [(a.text or "").strip()] for a in track.findall("attribute")}
        for sh in shapes:
            sh["attrs"] = {**whole, **sh["attrs"]}
        boxes, attrs = _frames_of(_import_shapes(shapes, size), size)
        if boxes:
            out.tracks.append((pid, boxes))
            out.attributes.append(attrs)
            out.track_ids.append(track.get("id", str(no)))
    return out
