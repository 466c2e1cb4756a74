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

from microg4m.common.atomic import atomic_path

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


def _meta(root: ET.Element, clip_id: str, size: int, width: int, height: int) -> None:
    task = _sub(_sub(root, "meta"), "task")
    for tag, text in (("name", clip_id), ("size", str(size)), ("mode", "interpolation"), ("overlap", "0"),
                      ("start_frame", "0"), ("stop_frame", str(size - 1)), ("frame_filter", "")):
        _sub(task, tag, text)
    label = _sub(_sub(task, "labels"), "label")
    _sub(label, "name", LABEL)
    _sub(label, "type", "rectangle")
    attr = _sub(_sub(label, "attributes"), "attribute")
    for tag, text in (("name", ATTRIBUTE), ("mutable", "False"), ("input_type", "number"),
                      ("default_value", "0"), ("values", "0\n1000000\n1")):
        _sub(attr, tag, text)
    orig = _sub(task, "original_size")
    _sub(orig, "width", str(width))
    _sub(orig, "height", str(height))
    _sub(task, "source", f"{clip_id}.mp4")


def _box(track: ET.Element, frame0: int, box, *, keyframe: bool, outside: bool, person_id: int) -> None:
    el = ET.SubElement(track, "box", {
        "frame": str(frame0), "outside": str(int(outside)), "occluded": "0", "keyframe": str(int(keyframe)),
        "xtl": _fmt(box[0]), "ytl": _fmt(box[1]), "xbr": _fmt(box[2]), "ybr": _fmt(box[3]), "z_order": "0",
    })
    _sub(el, "attribute", str(person_id)).set("name", ATTRIBUTE)


def clip_xml(clip_id: str, rows, *, frames: int, width: int, height: int) -> bytes:
    """The CVAT for video 1.1 XML of one clip. ``rows``: ``(frame_id, person_id, x1, y1, x2, y2)``
    (frame 1-based, pixels), any order; persons are written in id order."""
    root = ET.Element("annotations")
    _sub(root, "version", "1.1")
    _meta(root, clip_id, frames, width, height)
    by_person: dict[int, list] = {}
    for f, p, *box in rows:
        by_person.setdefault(int(p), []).append((int(f), *map(float, box)))
    for idx, pid in enumerate(sorted(by_person)):
        data = np.array(sorted(by_person[pid]), dtype=float)
        fr, boxes = data[:, 0].astype(int), data[:, 1:]
        track = ET.SubElement(root, "track", {"id": str(idx), "label": LABEL})
        for run in runs(fr):
            rf, rb = fr[run], np.round(boxes[run], 2)
            keys = keyframe_indices(rb)
            for k0, k1 in zip(keys, keys[1:] + [None]):
                _box(track, rf[k0] - 1, rb[k0], keyframe=True, outside=False, person_id=pid)
                if k1 is not None and k1 > k0 + 1:
                    mid = np.arange(k0 + 1, k1)
                    for i, b in zip(mid, interpolate(k0, rb[k0], k1, rb[k1], mid)):
                        _box(track, rf[i] - 1, b, keyframe=False, outside=False, person_id=pid)
            if rf[-1] < frames:  # the stretch ends before the clip does
                _box(track, rf[-1], rb[-1], keyframe=True, outside=True, person_id=pid)
    ET.indent(root, space="  ")
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode").encode() + b"\n"


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
    if mode != "interpolation" or root.find("image") is not None:
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


def _frames_of(kept: list, size: int) -> dict[int, tuple]:
    """Per-frame boxes (1-based frames) of imported shapes, as CVAT interpolates them."""
    boxes: dict[int, tuple] = {}
    for s0, s1 in zip(kept, kept[1:] + [None]):
        if s0["outside"]:
            continue
        boxes[s0["frame"] + 1] = tuple(s0["box"])
        end, nxt = (s1["frame"], s1["box"]) if s1 is not None else (size, s0["box"])  # held to the end
        mid = np.arange(s0["frame"] + 1, end)
        if len(mid):
            for f, b in zip(mid, interpolate(s0["frame"], s0["box"], end, nxt, mid)):
                boxes[int(f) + 1] = tuple(b)
    return boxes


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
            for a in el.iter("attribute"):
                if a.get("name") == ATTRIBUTE:
                    pid = _person_id(a.text) or pid
            shapes.append(dict(frame=frame, box=np.array(box), outside=outside,
                               keyframe=el.get("keyframe", "1") == "1"))
        shapes.sort(key=lambda s: s["frame"])
        if len({s["frame"] for s in shapes}) != len(shapes):
            raise CvatError(f"{path}: track {track.get('id', no)} has two boxes on one frame")
        boxes = _frames_of(_import_shapes(shapes, size), size)
        if boxes:
            out.tracks.append((pid, boxes))
    return out
