"""Motion-adaptive person tracking on cached detections, with the reference's record rules.

One job per source, kept clips only. Per clip a new BoT-SORT (microg4m.engines.tracker) is fed
every decoded frame with that frame's cached detections (every class, the model's
order; camera-motion compensation needs the pixels). The clip's motion level picks
the refresh interval k, the minimum number of sightings and the minimum box area.
Then the rules of the authors' ``trackPerson.py`` (pure functions below, tested on
hand-made tracker outputs):

- refreshes at frames k, 2k, 3k, ... (the frame counter starts at 1); a refresh's boxes
  are held until the next refresh; nothing is recorded before frame k;
- at a refresh, every tracker box (any class, any confidence) whose area, in integer
  pixels, is at least ``min_area`` of the frame is a sighting of its track; the track
  gets its person id (1, 2, ... in order of first sighting, tracker order) then, so
  recorded ids can have gaps;
- a box is recorded when it is class 0 with conf > ``record_conf`` and its track has at
  least ``min_detections`` sightings;
- close-up: a person is selected when the largest confident person covers more than
  ``closeup_area`` of the frame; while selected only that person is recorded, as long
  as it is found (confident) and covers at least ``closeup_area``; when it is lost or
  shrinks the selection ends at that refresh (everyone is recorded there);
- coordinates are truncated to integers before the area test and in the written boxes.

Options that depart from the reference (documented in docs/fidelity.md): ``box_mode:
interpolate`` (linear between refreshes), ``person_ids: contiguous`` (1..n by first
recorded frame) and ``pixels: subpixel`` (no truncation).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from microg4m.formats import manifest as mf
from microg4m.engines import tracker as bot
from microg4m.common.atomic import write_csv
from microg4m.formats.decisions import kept_ids, read_decisions
from microg4m.formats.detections import PERSON
from microg4m.common.media import iter_frames
from microg4m.formats.motion import read_motion
from microg4m.formats.tracks import COLUMNS
from microg4m.common.progress import progress
from microg4m.engines.model import passive_openmp

BOX_MODES = ("hold", "interpolate")
PERSON_IDS = ("reference", "contiguous")
PIXELS = ("integer", "subpixel")
LOW_MOTION = {"interval": 5, "min_detections": 3, "min_area": 0.10}
HIGH_MOTION = {"interval": 3, "min_detections": 2, "min_area": 0.20}


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
        return (self.x2 - self.x1) * (self.y2 - self.y1)


@dataclass(frozen=True)
class Rules:
    """The record rules' settings (defaults: the reference)."""

    record_conf: float = 0.55
    closeup_area: float = 0.5
    box_mode: str = "hold"
    person_ids: str = "reference"
    pixels: str = "integer"

    def __post_init__(self):
        for key, allowed in (("box_mode", BOX_MODES), ("person_ids", PERSON_IDS), ("pixels", PIXELS)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"track.{key} must be one of {allowed}, got {getattr(self, key)!r}")


# ---------------------------------------------------------------- pure record rules

def refresh_frames(n_frames: int, interval: int) -> list[int]:
    """1-based frames at which boxes are refreshed: interval, 2*interval, ... <= n_frames."""
    return list(range(interval, n_frames + 1, interval))


def _box(row, pixels: str) -> Box:
    coords = [float(v) for v in row[:4]]
    if pixels == "integer":
        coords = [float(math.trunc(v)) for v in coords]  # the reference's int(): toward zero
    return Box(*coords, float(row[5]))


@dataclass
class _State:
    """What the reference carries from refresh to refresh within one clip."""

    ids: dict  # track id -> person id (in order of first sighting)
    sightings: dict  # person id -> number of refreshes it was seen on
    selected: int | None = None  # person id of the close-up, if any


def refresh(rows: np.ndarray, state: _State, *, width: int, height: int, adapt: Adapt,
            rules: Rules) -> dict[int, Box]:
    """Person id -> box recorded at one refresh; updates ``state`` (ids, sightings, close-up).

    ``rows``: the tracker's output at this frame, ``x1, y1, x2, y2, id, conf, cls`` in the
    tracker's order, clipped to the frame.
    """
    frame_area = width * height
    seen: list[tuple[int, Box, bool]] = []  # (person id, box, confident person)
    for row in np.asarray(rows, dtype=np.float64).reshape(-1, 7):
        box = _box(row, rules.pixels)
        if box.area < adapt.min_area * frame_area:
            continue
        tid = int(row[4])
        pid = state.ids.setdefault(tid, len(state.ids) + 1)
        state.sightings[pid] = state.sightings.get(pid, 0) + 1
        seen.append((pid, box, int(row[6]) == PERSON and row[5] > rules.record_conf))
    confident = [(pid, box) for pid, box, ok in seen if ok]
    enough = lambda pid: state.sightings[pid] >= adapt.min_detections  # noqa: E731

    if state.selected is not None:
        current = next((box for pid, box in confident if pid == state.selected), None)
        if current is not None and current.area >= rules.closeup_area * frame_area:
            return {state.selected: current} if enough(state.selected) else {}
        state.selected = None  # lost or shrunk: everyone is recorded at this refresh
    else:
        largest, largest_area = None, 0.0
        for pid, box in confident:  # the first of equal areas wins
            if box.area > largest_area:
                largest, largest_area = (pid, box), box.area
        if largest is not None and largest_area > rules.closeup_area * frame_area:
            state.selected = largest[0]
            return {largest[0]: largest[1]} if enough(largest[0]) else {}
    return {pid: box for pid, box in confident if enough(pid)}


def expand(recorded: Mapping[int, Mapping[int, Box]], n_frames: int, interval: int,
           box_mode: str = "hold") -> list[tuple[int, int, Box]]:
    """Per-frame boxes ``(frame, person_id, box)`` from the boxes recorded at refreshes.

    A refresh's boxes cover its frame up to the frame before the next refresh (the last
    one up to ``n_frames``). ``interpolate`` moves a box linearly towards the same
    person's box at the next refresh; the confidence is the refresh's.
    """
    if box_mode not in BOX_MODES:
        raise ValueError(f"box_mode must be one of {BOX_MODES}, got {box_mode!r}")
    refreshes = refresh_frames(n_frames, interval)
    rows = []
    for k, r in enumerate(refreshes):
        end = refreshes[k + 1] if k + 1 < len(refreshes) else n_frames + 1
        nxt = recorded.get(end, {}) if k + 1 < len(refreshes) else {}
        for pid, box in recorded.get(r, {}).items():
            target = nxt.get(pid) if box_mode == "interpolate" else None
            for f in range(r, end):
                if target is None:
                    rows.append((f, pid, box))
                    continue
                t = (f - r) / (end - r)
                rows.append((f, pid, Box(
                    box.x1 + t * (target.x1 - box.x1), box.y1 + t * (target.y1 - box.y1),
                    box.x2 + t * (target.x2 - box.x2), box.y2 + t * (target.y2 - box.y2), box.conf)))
    return rows


def contiguous_ids(rows: list[tuple]) -> list[tuple]:
    """Person ids renumbered 1..n in order of first recorded frame (ties: old id)."""
    first: dict[int, int] = {}
    for f, pid, *_ in sorted(rows, key=lambda r: (r[0], r[1])):
        first.setdefault(pid, len(first) + 1)
    return [(f, first[pid], *rest) for f, pid, *rest in rows]


def record_clip(outputs: Mapping[int, np.ndarray], n_frames: int, *, width: int, height: int,
                adapt: Adapt, rules: Rules = Rules()) -> list[tuple]:
    """Rows ``(frame_id, person_id, x1, y1, x2, y2, conf)`` of one clip, sorted.

    ``outputs``: tracker output per frame (only refresh frames are read).
    """
    state = _State(ids={}, sightings={})
    recorded = {}
    empty = np.empty((0, 7))
    for r in refresh_frames(n_frames, adapt.interval):
        sel = refresh(outputs.get(r, empty), state, width=width, height=height, adapt=adapt, rules=rules)
        if sel:
            recorded[r] = sel
    rows = [(f, pid, b.x1, b.y1, b.x2, b.y2, b.conf)
            for f, pid, b in expand(recorded, n_frames, adapt.interval, rules.box_mode)]
    if rules.person_ids == "contiguous":
        rows = contiguous_ids(rows)
    return sorted(rows, key=lambda row: (row[0], row[1]))


# ---------------------------------------------------------------- the tracker loop

def load_detections(path: str | os.PathLike) -> dict[str, dict[int, np.ndarray]]:
    """clip_id -> frame -> rows ``x1, y1, x2, y2, conf, cls`` (cache order) from a detection cache."""
    from microg4m.formats.detections import read_detections

    return bot.by_frame(read_detections(path))


def run(manifest, detections, decisions, motion, out, *, tracker: str = "ultralytics",
        box_mode: str = "hold", person_ids: str = "reference", pixels: str = "integer",
        record_conf: float = 0.55, closeup_area: float = 0.5, low_motion: Mapping = LOW_MOTION,
        high_motion: Mapping = HIGH_MOTION, botsort: Mapping | None = None, reid_weights=None,
        device: str = "auto", previews_dir=None, contact_sheet=None) -> pd.DataFrame:
    """Track the kept clips of one unit; write ``tracks/{unit}.csv`` (``out``) and previews.

    ``device``: ``track.device``, resolved here, on the machine the job runs on (the ReID
    model's device; without one the CPU)."""
    passive_openmp()  # before torch loads
    from microg4m.report import preview

    requested = device
    rules = Rules(record_conf=record_conf, closeup_area=closeup_area, box_mode=box_mode,
                  person_ids=person_ids, pixels=pixels)
    bot.settings(botsort)  # a bad setting fails even for a source without kept clips
    device = bot.resolve_device(device, reid_weights)
    logging.getLogger(__name__).info("track: %s tracker on %s (track.device %s, ReID model %s)", tracker,
                                     device, requested, reid_weights or "none")
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
    from microg4m.formats.detections import read_coverage

    short = {c: n for c, n in read_coverage(detections, ok.loc[kept, "frames"].items()).items()
             if n < int(ok.at[c, "frames"])}
    if short:
        raise ValueError(f"{detections}: kept clips detected on their first frames only {short} (the decisions "
                         f"{decisions} are not those of these detections: re-run filter)")

    rows, tiles = [], []
    on_sheet = preview.sheet_clips(kept)
    for clip in progress(kept, "track"):
        a = adapt[levels[clip]]
        path = mf.clip_file(manifest, clip)
        height, width = int(ok.at[clip, "height"]), int(ok.at[clip, "width"])
        mid = (int(ok.at[clip, "frames"]) + 1) // 2
        wanted = set(refresh_frames(int(ok.at[clip, "frames"]), a.interval))
        outputs, n = {}, 0
        t = bot.make(tracker, botsort, reid_weights=reid_weights, device=device)
        feed = _Keep(iter_frames(path), mid if clip in on_sheet else None)
        for n, rows_n in bot.run(t, feed, dets.get(clip, {}), width=width, height=height):
            if n in wanted:
                outputs[n] = rows_n
        held = feed.held
        if n == 0:
            raise ValueError(f"{path}: no decodable frames")
        clip_rows = record_clip(outputs, n, width=width, height=height, adapt=a, rules=rules)
        rows += [(clip, *r) for r in clip_rows]
        if held is not None:
            tiles.append(preview.make_tile(clip, mid, held, [r[1:6] for r in clip_rows if r[0] == mid]))

    df = to_frame(rows, rules.pixels)
    write_csv(out, df)
    if contact_sheet is not None:
        preview.contact_sheet(tiles, contact_sheet, title=Path(out).stem)
    if previews_dir is not None:
        Path(previews_dir).mkdir(parents=True, exist_ok=True)  # also without a kept clip
        for clip in kept:
            sub = df[df["video_id"] == clip]
            preview.clip_preview(mf.clip_file(manifest, clip), sub, Path(previews_dir) / f"{clip}.mp4")
    return df


class _Keep:
    """Iterate frames, keeping frame number ``keep`` (for the contact sheet) as ``.held``."""

    def __init__(self, frames, keep: int | None):
        self.frames, self.keep, self.held = frames, keep, None

    def __iter__(self):
        for n, frame in enumerate(self.frames, start=1):
            if n == self.keep:
                self.held = frame
            yield frame


def to_frame(rows: list[tuple], pixels: str = "integer") -> pd.DataFrame:
    """The tracks table, formatted: integer pixels as integers (sub-pixel with 2
    decimals), conf with 4 decimals, sorted."""
    rows = sorted(rows, key=lambda r: (r[0], r[1], r[2]))
    xy = (lambda v: str(int(v))) if pixels == "integer" else (lambda v: f"{v:.2f}")
    return pd.DataFrame(
        [(v, int(f), int(p), xy(x1), xy(y1), xy(x2), xy(y2), f"{c:.4f}")
         for v, f, p, x1, y1, x2, y2, c in rows], columns=COLUMNS)
