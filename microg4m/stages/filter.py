"""Filter stage: keep a clip when persons are visible long enough and there is no shot cut.

Reads the detection cache and the scene cuts (never runs YOLO), and writes one decision
per ok clip to ``filter/{src}.tsv``. Rejected clips are only marked, never deleted.

With a ``filter.*`` threshold on the quality scores set (microg4m.formats.quality_rules:
``max_text_share``, ``camera``, ``min_sharpness``, ...; all off by default) it also reads
the unit's quality table and rejects a clip for ``text``, ``camera``, ``blurry`` or
``exposure`` before it counts persons: those reasons, like a cut, are known before detect
runs, so detect runs no frame of such a clip (microg4m.formats.rejection).

A frame is a person frame when it has a person box with conf > ``person_conf``. Which
boxes (``count``):

- ``tracked`` (the reference): the boxes that the reference's bare ``model.track`` call
  outputs, i.e. ultralytics' default tracker (TrackTrack in ultralytics 8.4) run on the
  cached detections. A new track is output only once it is confirmed (TrackTrack: on
  its 3rd frame; BoT-SORT: its 2nd), unless it starts on frame 1, so a person entering
  the clip counts from then on. The tracker runs without camera-motion compensation
  here (no frame is decoded): that only moves predicted boxes, and changed no decision
  on the test footage (docs/fidelity.md).
- ``detections``: every cached detection.

detect skips the frames a clip that must be rejected does not need (microg4m.formats.rejection);
such a clip's ``person_share`` counts its detected frames only (``detected_frames`` <
frames), and the decision is checked again here: a clip the current settings could keep
but whose detections stop early is an error (the detect stage re-runs when the filter's
settings change, so this happens only with files made by hand).
"""

from __future__ import annotations

import os
from typing import Iterable

import pandas as pd

from microg4m.formats import manifest as mf
from microg4m.common.atomic import write_tsv
from microg4m.formats.detections import read_coverage, read_detections
from microg4m.formats.rejection import too_few
from microg4m.formats.quality import read_quality
from microg4m.formats.quality_rules import QualityRules
from microg4m.formats.scenes import format_cuts, read_scenes
from microg4m.engines.model import passive_openmp

COLUMNS = ["clip_id", "person_share", "cuts", "keep", "reason", "detected_frames"]
COUNTS = ("tracked", "detections")


def tracked_boxes(detections: pd.DataFrame, clips: pd.DataFrame) -> pd.DataFrame:
    """The boxes the reference's filter sees, ``clip_id, frame, conf, cls``, for every clip
    of ``clips`` (``clip_id, frames, width, height``): the output of ultralytics' default
    tracker; on a frame where it outputs nothing and holds no new (unconfirmed) track,
    ultralytics passes the raw detections on, and so does this."""
    from microg4m.engines import tracker as bot

    by_clip = bot.by_frame(detections)
    rows = []
    for clip, frames, width, height in zip(clips["clip_id"], clips["frames"], clips["width"], clips["height"]):
        t = bot.model_track_default()
        dets = by_clip.get(clip, {})
        for n, out in bot.run(t, [None] * int(frames), dets, width=int(width), height=int(height)):
            if len(out):
                conf_cls = out[:, [5, 6]]
            elif n in dets and all(s.is_activated for s in t.tracked_stracks):
                conf_cls = dets[n][:, [4, 5]]
            else:
                continue
            rows += [(clip, n, float(c), int(k)) for c, k in conf_cls]
    return pd.DataFrame(rows, columns=["clip_id", "frame", "conf", "cls"])


def _check(person_conf, min_person_share, max_cuts) -> None:
    if not 0.0 <= float(person_conf) <= 1.0:
        raise ValueError(f"filter.person_conf = {person_conf!r}: expected a number in [0, 1]")
    if not 0.0 <= float(min_person_share) <= 1.0:
        raise ValueError(f"filter.min_person_share = {min_person_share!r}: expected a number in [0, 1]")
    if isinstance(max_cuts, bool) or not isinstance(max_cuts, int) or max_cuts < 0:
        raise ValueError(f"filter.max_cuts = {max_cuts!r}: expected an integer >= 0")


def decide(clips: pd.DataFrame, detections: pd.DataFrame, cuts: pd.DataFrame, *, person_conf: float = 0.6,
           min_person_share: float = 0.6, max_cuts: int = 0, screened: set[str] | frozenset = frozenset(),
           detected: dict | None = None, quality: pd.DataFrame | None = None, **thresholds) -> pd.DataFrame:
    """Decisions per clip (pure).

    clips: ``clip_id, frames``; detections: ``clip_id, frame, conf[, cls]`` (one row per
    box: the boxes counted, see ``count``);
    cuts: ``clip_id, cuts`` (lists of frame numbers); detected: clip -> frames detected
    (1..n; default every frame). Returns ``clip_id, person_share (float), cuts (list),
    keep (bool), reason, detected_frames`` in the order of ``clips``. Reason precedence:
    screened > scene_cut > text > camera > blurry > exposure > few_persons > kept: what is
    known before detect runs first (detect then runs no frame of such a clip).

    ``quality``: the quality table (microg4m.formats.quality.read_quality), needed when a
    threshold of ``thresholds`` (microg4m.formats.quality_rules.THRESHOLDS) is set.
    """
    _check(person_conf, min_person_share, max_cuts)
    rules = QualityRules(**thresholds)
    scores = {}
    if rules.active():
        if quality is None:
            raise ValueError("a quality threshold of filter.* is set but there is no quality table")
        scores = quality.set_index("clip_id").to_dict("index")
    cut_map = dict(zip(cuts["clip_id"], cuts["cuts"]))
    missing = [c for c in clips["clip_id"] if c not in cut_map]
    if missing:
        raise ValueError(f"no scene cuts for clips {missing[:5]} (scenes table out of date?)")
    persons = detections["cls"] == 0 if "cls" in detections else True
    strong = detections[persons & (detections["conf"] > person_conf)]
    person_frames = strong.groupby("clip_id")["frame"].nunique()
    rows = []
    for clip, frames in zip(clips["clip_id"], clips["frames"]):
        if frames <= 0:
            raise ValueError(f"clip {clip}: manifest has {frames} frames")
        found = int(person_frames.get(clip, 0))
        seen = int((detected or {}).get(clip, frames))
        clip_cuts = list(cut_map[clip])
        if rules.active() and clip not in scores:
            raise ValueError(f"no quality scores for clip {clip} (quality table out of date?)")
        poor = rules.reason(scores[clip]) if rules.active() else None  # text, camera, blurry, exposure
        if clip in screened:
            reason = "screened"
        elif len(clip_cuts) > max_cuts:
            reason = "scene_cut"
        elif poor:
            reason = poor
        elif too_few(found + int(frames) - seen, int(frames), min_person_share):  # seen == frames: the share
            reason = "few_persons"
        elif seen < frames:
            raise ValueError(f"clip {clip}: detections cover frames 1-{seen} of {frames} only, not enough for "
                             "these filter settings (re-run detect with them: the workflow does)")
        else:
            reason = "kept"
        rows.append({"clip_id": clip, "person_share": found / int(frames), "cuts": clip_cuts,
                     "keep": reason == "kept", "reason": reason, "detected_frames": seen})
    return pd.DataFrame(rows, columns=COLUMNS)


def run(manifest: str | os.PathLike, detections: str | os.PathLike, scenes: str | os.PathLike,
        out: str | os.PathLike, *, count: str = "tracked", person_conf: float = 0.6,
        min_person_share: float = 0.6, max_cuts: int = 0, screened: Iterable[str] = (),
        quality: str | os.PathLike | None = None, **thresholds) -> pd.DataFrame:
    """Decide every ok clip of ``manifest``; write ``out`` (TSV) and return the decisions.

    ``quality``: the unit's quality table, read when a quality threshold (``thresholds``:
    ``max_text_share``, ``min_sharpness``, ...; microg4m.formats.quality_rules) is set.

    ``screened``: clip ids excluded by hand (see read_screening). The workflow passes only
    the unit's own ids as a rule param, so an exclusion re-runs only that unit's filter.
    """
    passive_openmp()  # before torch loads
    _check(person_conf, min_person_share, max_cuts)
    rules = QualityRules(**thresholds)  # bad thresholds fail before any work
    if count not in COUNTS:
        raise ValueError(f"filter.count = {count!r}: expected one of {COUNTS}")
    clips = mf.ok_clips(manifest)
    dets = read_detections(detections)
    unknown = sorted(set(dets["clip_id"]) - set(clips["clip_id"]))
    if unknown:
        raise ValueError(f"{detections}: boxes for clips not ok in {manifest}: {unknown[:5]} (cache out of date?)")
    detected = read_coverage(detections, zip(clips["clip_id"], clips["frames"]))
    if count == "tracked":  # the tracker sees a clip's detected frames
        dets = tracked_boxes(dets, clips.assign(frames=clips["clip_id"].map(detected)))
    if rules.active() and quality is None:
        raise ValueError("a quality threshold of filter.* is set but no quality table was given")
    scores = read_quality(quality) if rules.active() else None
    table = decide(clips, dets, read_scenes(scenes), person_conf=person_conf, min_person_share=min_person_share,
                   max_cuts=max_cuts, screened=set(screened), detected=detected, quality=scores, **thresholds)
    written = table.assign(
        person_share=table["person_share"].map(lambda x: f"{x:.4f}"),
        cuts=table["cuts"].map(format_cuts),
        keep=table["keep"].astype(int),
    )
    write_tsv(out, written)
    return table
