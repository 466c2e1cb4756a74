"""Motion-adaptive person tracking: BoT-SORT (boxmot) on cached detections.

One job per source, kept clips only. Per clip a new BotSort is fed every decoded frame
with that frame's cached detections (camera-motion compensation needs the pixels).
The clip's motion level picks the refresh interval, the minimum number of refreshes a
person must be seen on and the minimum box area. Then the reference's record rules
(pure functions below, tested without a tracker):

- boxes are refreshed on frames 1, 1+interval, ...; a refresh replaces the boxes;
- at a refresh, every tracker box of class person with conf > ``record_conf`` counts
  as one sighting of its track id; a box is recorded when its id has ≥ min_detections
  sightings and its area is ≥ min_area of the frame;
- if the largest of those confident person boxes covers more than ``closeup_area`` of
  the frame, only that person can be recorded at this refresh;
- between refreshes: ``hold`` repeats the refreshed box; ``interpolate`` moves it
  linearly to the same person's box at the next refresh (held when there is none);
- person ids 1, 2, ... per clip in order of first recorded frame (ties: track id).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from .progress import progress
from . import manifest as mf
from .atomic import write_csv
from .filter import kept_ids, read_decisions
from .media import iter_frames
from .motion import read_motion

COLUMNS = ["video_id", "frame_id", "person_id", "xmin", "ymin", "xmax", "ymax", "conf"]
BOX_MODES = ("hold", "interpolate")
PERSON = 0
LOW_MOTION = {"interval": 5, "min_detections": 3, "min_area": 0.10}
HIGH_MOTION = {"interval": 3, "min_detections": 2, "min_area": 0.20}
BOTSORT = {
    "track_high_thresh": 0.5, "track_low_thresh": 0.1, "new_track_thresh": 0.6,
    "track_buffer": 30, "match_thresh": 0.8, "fuse_score": True, "cmc_method": "sof",
}
# config names that differ from boxmot's BotSort arguments
_BOTSORT_RENAME = {"fuse_score": "fuse_first_associate"}
_BOTSORT_KEYS = set(BOTSORT) | {"proximity_thresh", "appearance_thresh", "frame_rate"}


@dataclass(frozen=True)
class Adapt:
    """Record settings chosen by the motion level."""

    interval: int
    min_detections: int
    min_area: float  # fraction of the frame area

    @classmethod
    def from_dict(cls, d: Mapping, what: str) -> "Adapt":
        missing = {"interval", "min_detections", "min_area"} - set(d)
        if missing:
            raise ValueError(f"track.{what} lacks {sorted(missing)}")
        a = cls(int(d["interval"]), int(d["min_detections"]), float(d["min_area"]))
        if a.interval < 1 or a.min_detections < 1 or not 0 <= a.min_area <= 1:
            raise ValueError(f"track.{what}: interval and min_detections must be >= 1 and "
                             f"min_area within [0, 1], got {dict(d)}")
        return a


@dataclass(frozen=True)
class Box:
    x1: float
    y1: float
    x2: float
    y2: float
    conf: float

    @property
    def area(self) -> float:
        return max(0.0, self.x2 - self.x1) * max(0.0, self.y2 - self.y1)


# ---------------------------------------------------------------- pure record rules

def refresh_frames(n_frames: int, interval: int) -> list[int]:
    """1-based frames at which boxes are refreshed: 1, 1+interval, ... <= n_frames."""
    return list(range(1, n_frames + 1, interval))


def select_refresh(outputs: np.ndarray, sightings: dict[int, int], *, width: int, height: int,
                   adapt: Adapt, record_conf: float, closeup_area: float) -> dict[int, Box]:
    """Boxes recorded at one refresh, by track id; updates ``sightings`` in place.

    ``outputs``: the tracker's rows at this frame, ``[x1, y1, x2, y2, id, conf, cls, ...]``
    in pixels. Boxes are clipped to the frame first.
    """
    outputs = np.asarray(outputs, dtype=np.float64)
    if outputs.size == 0:
        return {}
    frame_area = float(width * height)
    confident: dict[int, Box] = {}
    for row in outputs.reshape(len(outputs), -1):
        if int(row[6]) != PERSON or not row[5] > record_conf:
            continue
        x1, x2 = np.clip([row[0], row[2]], 0, width)
        y1, y2 = np.clip([row[1], row[3]], 0, height)
        tid = int(row[4])
        confident[tid] = Box(float(x1), float(y1), float(x2), float(y2), float(row[5]))
        sightings[tid] = sightings.get(tid, 0) + 1
    if not confident:
        return {}
    allowed = confident
    largest = max(confident, key=lambda t: (confident[t].area, -t))
    if confident[largest].area > closeup_area * frame_area:
        allowed = {largest: confident[largest]}
    return {
        tid: box for tid, box in sorted(allowed.items())
        if sightings[tid] >= adapt.min_detections and box.area >= adapt.min_area * frame_area
    }


def person_ids(recorded: Mapping[int, Mapping[int, Box]]) -> dict[int, int]:
    """Track id -> person id 1, 2, ... in order of first recorded refresh (ties: track id)."""
    ids: dict[int, int] = {}
    for frame in sorted(recorded):
        for tid in sorted(recorded[frame]):
            ids.setdefault(tid, len(ids) + 1)
    return ids


def expand(recorded: Mapping[int, Mapping[int, Box]], n_frames: int, interval: int,
           box_mode: str = "hold") -> list[tuple[int, int, Box]]:
    """Per-frame boxes ``(frame, track_id, box)`` from the boxes recorded at refreshes.

    Each refresh's boxes cover its frame up to the frame before the next refresh (the
    last one up to ``n_frames``). ``interpolate`` moves a box linearly towards the same
    track's box at the next refresh; the confidence is the refresh's.
    """
    if box_mode not in BOX_MODES:
        raise ValueError(f"box_mode must be one of {BOX_MODES}, got {box_mode!r}")
    refreshes = refresh_frames(n_frames, interval)
    rows = []
    for k, r in enumerate(refreshes):
        end = refreshes[k + 1] if k + 1 < len(refreshes) else n_frames + 1
        boxes = recorded.get(r, {})
        nxt = recorded.get(end, {}) if k + 1 < len(refreshes) else {}
        for tid, box in boxes.items():
            target = nxt.get(tid) if box_mode == "interpolate" else None
            for f in range(r, end):
                if target is None:
                    rows.append((f, tid, box))
                else:
                    t = (f - r) / (end - r)
                    rows.append((f, tid, Box(
                        box.x1 + t * (target.x1 - box.x1), box.y1 + t * (target.y1 - box.y1),
                        box.x2 + t * (target.x2 - box.x2), box.y2 + t * (target.y2 - box.y2),
                        box.conf)))
    return rows


def record_clip(refresh_outputs: Mapping[int, np.ndarray], n_frames: int, *, width: int,
                height: int, adapt: Adapt, record_conf: float = 0.55,
                closeup_area: float = 0.5, box_mode: str = "hold") -> list[tuple]:
    """Rows ``(frame_id, person_id, x1, y1, x2, y2, conf)`` of one clip, sorted.

    ``refresh_outputs``: tracker output per refresh frame (other frames are ignored).
    """
    sightings: dict[int, int] = {}
    recorded = {}
    for r in refresh_frames(n_frames, adapt.interval):
        out = refresh_outputs.get(r)
        if out is not None and len(out):
            sel = select_refresh(out, sightings, width=width, height=height, adapt=adapt,
                                 record_conf=record_conf, closeup_area=closeup_area)
            if sel:
                recorded[r] = sel
    ids = person_ids(recorded)
    rows = [(f, ids[tid], b.x1, b.y1, b.x2, b.y2, b.conf)
            for f, tid, b in expand(recorded, n_frames, adapt.interval, box_mode)]
    return sorted(rows, key=lambda row: (row[0], row[1]))


# ---------------------------------------------------------------- the tracker loop

def make_tracker(botsort: Mapping | None = None, *, reid_weights=None, device="cpu"):
    """A new boxmot BotSort from the config's ``track.botsort`` settings."""
    from boxmot import BotSort
    from boxmot.utils import logger as boxmot_log

    settings = {**BOTSORT, **(botsort or {})}
    unknown = set(settings) - _BOTSORT_KEYS
    if unknown:
        raise ValueError(f"track.botsort: unknown settings {sorted(unknown)} "
                         f"(known: {sorted(_BOTSORT_KEYS)})")
    kwargs = {_BOTSORT_RENAME.get(k, k): v for k, v in settings.items()}
    kwargs.setdefault("frame_rate", 30)
    cmc = kwargs.pop("cmc_method")
    if cmc in (None, "none", False):
        kwargs["use_cmc"] = False
        kwargs["cmc_method"] = None
    else:
        kwargs["cmc_method"] = str(cmc)
    if reid_weights:
        path = Path(reid_weights)
        if not path.is_file():
            raise FileNotFoundError(f"track.reid_weights: {path} not found")
        if device == "auto":
            from .detect import select_device

            device = select_device("auto")
        kwargs.update(use_embeddings=True, reid_weights=path, device=device, half=False)
    else:
        kwargs["use_embeddings"] = False
    # boxmot logs its settings at INFO on every construction: once per clip is noise
    level = boxmot_log.level
    boxmot_log.setLevel(logging.WARNING)
    try:
        return BotSort(**kwargs)
    finally:
        boxmot_log.setLevel(level)


def track_frames(frames: Iterable[np.ndarray], detections: Mapping[int, np.ndarray], tracker,
                 every: int = 1, on_frame=None) -> tuple[dict[int, np.ndarray], int]:
    """Feed every frame (1-based) with its detections (Nx5 ``x1,y1,x2,y2,conf``).

    Returns the tracker output (rows ``x1,y1,x2,y2,id,conf,cls,det_ind``) on frames 1,
    1+every, ... and the number of frames. ``on_frame(frame_no, frame)`` is called for
    every decoded frame.
    """
    out, n = {}, 0
    empty = np.empty((0, 6), dtype=np.float32)
    for n, frame in enumerate(frames, start=1):
        det = detections.get(n)
        dets = empty if det is None or not len(det) else np.column_stack(
            [det[:, :5], np.full(len(det), PERSON)]).astype(np.float32)
        res = np.asarray(tracker.update(dets, frame), dtype=np.float64)
        if (n - 1) % every == 0:
            out[n] = res.reshape(len(res), -1) if res.size else np.empty((0, 8))
        if on_frame is not None:
            on_frame(n, frame)
    return out, n


def load_detections(path: str | os.PathLike) -> dict[str, dict[int, np.ndarray]]:
    """clip_id -> frame -> Nx5 array ``x1,y1,x2,y2,conf`` from ``detections/{src}.parquet``."""
    from .detect import read_detections

    df = read_detections(path)
    out: dict[str, dict[int, np.ndarray]] = {}
    for (clip, frame), g in df.groupby(["clip_id", "frame"], sort=True):
        g = g[g["cls"] == PERSON]
        out.setdefault(str(clip), {})[int(frame)] = g[["x1", "y1", "x2", "y2", "conf"]].to_numpy(np.float64)
    return out


def run(manifest, detections, decisions, motion, out, *, box_mode: str = "hold",
        record_conf: float = 0.55, closeup_area: float = 0.5, low_motion: Mapping = LOW_MOTION,
        high_motion: Mapping = HIGH_MOTION, botsort: Mapping | None = None, reid_weights=None,
        device: str = "cpu", previews_dir=None, contact_sheet=None) -> pd.DataFrame:
    """Track the kept clips of one source; write ``tracks/{src}.csv`` (``out``) and previews."""
    from . import preview

    if box_mode not in BOX_MODES:
        raise ValueError(f"track.box_mode must be one of {BOX_MODES}, got {box_mode!r}")
    adapt = {"low": Adapt.from_dict(low_motion, "low_motion"),
             "high": Adapt.from_dict(high_motion, "high_motion")}
    ok = mf.ok_clips(manifest).set_index("clip_id")
    kept = kept_ids(read_decisions(decisions))
    levels = read_motion(motion)
    for clip in kept:
        if clip not in ok.index:
            raise ValueError(f"{decisions}: kept clip {clip} is not an ok clip of {manifest}")
        if clip not in levels:
            raise ValueError(f"{motion}: no motion level for kept clip {clip}")
    dets = load_detections(detections)

    rows, tiles = [], []
    on_sheet = preview.sheet_clips(kept)
    for clip in progress(kept, "track"):
        a = adapt[levels[clip]]
        path = mf.clip_file(manifest, clip)
        mid = (int(ok.at[clip, "frames"]) + 1) // 2
        held = {}

        def grab(n, frame, mid=mid, held=held, keep=clip in on_sheet):
            if n == mid and keep:
                held["frame"] = frame

        tracker = make_tracker(botsort, reid_weights=reid_weights, device=device)
        refresh, n = track_frames(iter_frames(path), dets.get(clip, {}), tracker,
                                  every=a.interval, on_frame=grab)
        if n == 0:
            raise ValueError(f"{path}: no decodable frames")
        height, width = int(ok.at[clip, "height"]), int(ok.at[clip, "width"])
        clip_rows = record_clip(refresh, n, width=width, height=height, adapt=a,
                                record_conf=record_conf, closeup_area=closeup_area, box_mode=box_mode)
        rows += [(clip, *r) for r in clip_rows]
        if "frame" in held:
            tiles.append(preview.make_tile(clip, mid, held["frame"], [r[1:6] for r in clip_rows if r[0] == mid]))

    df = to_frame(rows)
    write_csv(out, df)
    if contact_sheet is not None:
        preview.contact_sheet(tiles, contact_sheet, title=Path(out).stem)
    if previews_dir is not None:
        for clip in kept:
            sub = df[df["video_id"] == clip]
            preview.clip_preview(mf.clip_file(manifest, clip), sub, Path(previews_dir) / f"{clip}.mp4")
    return df


def to_frame(rows: list[tuple]) -> pd.DataFrame:
    """The tracks table, formatted: pixels and conf as fixed-decimal strings, sorted."""
    rows = sorted(rows, key=lambda r: (r[0], r[1], r[2]))
    df = pd.DataFrame(
        [(v, int(f), int(p), f"{x1:.2f}", f"{y1:.2f}", f"{x2:.2f}", f"{y2:.2f}", f"{c:.4f}")
         for v, f, p, x1, y1, x2, y2, c in rows], columns=COLUMNS)
    return df


