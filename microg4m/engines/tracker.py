"""BoT-SORT on cached detections: the two implementations and the per-frame loop.

* ``ultralytics`` (default): ultralytics' own ``BOTSORT``, the class that the reference's
  ``model.track`` runs. Fed the same detections (every class, the model's order) and the
  same frames, it gives the same track ids and boxes; its camera-motion compensation
  is sparse optical flow on a half-scale frame.
* ``boxmot``: boxmot's ``BotSort`` (appearance ReID models with ``track.reid_weights``).
  Its Kalman filter and matching differ in details; its sparse-flow compensation is set
  as close to ultralytics' as boxmot allows (see ``_match_ultralytics_cmc``).

``REFERENCE`` is the authors' ``botsort.yaml`` (their track stage). Their filter calls
``model.track`` without a tracker, so it gets ultralytics' default tracker:
``model_track_default`` builds that one (TrackTrack in ultralytics 8.4, BoT-SORT before).
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Iterable, Iterator, Mapping

import numpy as np

BACKENDS = ("ultralytics", "boxmot")
REFERENCE = {
    "track_high_thresh": 0.5, "track_low_thresh": 0.1, "new_track_thresh": 0.6,
    "track_buffer": 30, "match_thresh": 0.8, "fuse_score": True, "cmc_method": "sof",
    "proximity_thresh": 0.5, "appearance_thresh": 0.25,
}
CMC_METHODS = ("sof", "orb", "sift", "ecc", "none")
_ULTRALYTICS_CMC = {"sof": "sparseOptFlow", "orb": "orb", "sift": "sift", "ecc": "ecc", "none": None}
EMPTY = np.empty((0, 7), dtype=np.float32)


def settings(botsort: Mapping | None, base: Mapping = REFERENCE) -> dict:
    """``base`` overridden by ``botsort`` (the config's ``track.botsort``), checked."""
    out = {**base, **(botsort or {})}
    unknown = set(out) - set(REFERENCE)
    if unknown:
        raise ValueError(f"track.botsort: unknown settings {sorted(unknown)} (known: {sorted(REFERENCE)})")
    cmc = "none" if out["cmc_method"] in (None, False) else str(out["cmc_method"])
    if cmc not in CMC_METHODS:
        raise ValueError(f"track.botsort.cmc_method = {out['cmc_method']!r}: expected one of {CMC_METHODS}")
    out["cmc_method"] = cmc
    return out


def make(backend: str = "ultralytics", botsort: Mapping | None = None, *, base: Mapping = REFERENCE,
         reid_weights=None, device: str = "cpu"):
    """A new tracker for one clip."""
    s = settings(botsort, base)
    if backend == "ultralytics":
        if reid_weights:
            raise ValueError("track.reid_weights needs track.tracker: boxmot")
        from ultralytics.trackers.bot_sort import BOTSORT

        return BOTSORT(SimpleNamespace(
            tracker_type="botsort", track_high_thresh=s["track_high_thresh"],
            track_low_thresh=s["track_low_thresh"], new_track_thresh=s["new_track_thresh"],
            track_buffer=s["track_buffer"], match_thresh=s["match_thresh"], fuse_score=s["fuse_score"],
            gmc_method=_ULTRALYTICS_CMC[s["cmc_method"]], proximity_thresh=s["proximity_thresh"],
            appearance_thresh=s["appearance_thresh"], with_reid=False, model="auto", device=device))
    if backend == "boxmot":
        return _make_boxmot(s, reid_weights, device)
    raise ValueError(f"track.tracker = {backend!r}: expected one of {BACKENDS}")


def resolve_device(device: str, reid_weights=None) -> str:
    """``track.device`` on this machine: the device of the ReID model, the one part of
    tracking that can use a GPU (BoT-SORT itself runs on the CPU). ``auto``: CUDA when
    there is a ReID model and this machine has CUDA, else the CPU; without a ReID model
    always the CPU, whatever the setting."""
    if not reid_weights:
        return "cpu"
    from microg4m.engines.runtime import select_device

    return select_device(device)


def model_track_default(device: str = "cpu"):
    """A new tracker as a bare ``model.track()`` gets it from the installed ultralytics: the
    tracker file named by its default config, with that file's settings.

    Fed from the cache it lacks one input of ultralytics' TrackTrack: the extra boxes of a
    looser NMS that ``model.track`` recovers from the raw predictions (used only above its
    high threshold, 0.6).
    """
    from ultralytics.cfg import get_cfg
    from ultralytics.trackers.track import TRACKER_MAP
    from ultralytics.utils import YAML, IterableSimpleNamespace
    from ultralytics.utils.checks import check_yaml

    cfg = IterableSimpleNamespace(**YAML.load(check_yaml(get_cfg().tracker)))
    cfg.device = device
    return TRACKER_MAP[cfg.tracker_type](args=cfg)


def _make_boxmot(s: dict, reid_weights, device: str):
    from boxmot import BotSort
    from boxmot.utils import logger as boxmot_log

    kwargs = dict(track_high_thresh=s["track_high_thresh"], track_low_thresh=s["track_low_thresh"],
                  new_track_thresh=s["new_track_thresh"], track_buffer=s["track_buffer"],
                  match_thresh=s["match_thresh"], fuse_first_associate=s["fuse_score"],
                  proximity_thresh=s["proximity_thresh"], appearance_thresh=s["appearance_thresh"],
                  frame_rate=30)
    if s["cmc_method"] == "none":
        kwargs.update(use_cmc=False, cmc_method=None)
    else:
        kwargs["cmc_method"] = s["cmc_method"]
    if reid_weights:
        path = Path(reid_weights)
        if not path.is_file():
            raise FileNotFoundError(f"track.reid_weights: {path} not found")
        kwargs.update(use_embeddings=True, reid_weights=path, device=device, half=False)
    else:
        kwargs["use_embeddings"] = False
    # boxmot logs its settings at INFO on every construction: once per clip is noise
    level = boxmot_log.level
    boxmot_log.setLevel(logging.WARNING)
    try:
        tracker = BotSort(**kwargs)
    finally:
        boxmot_log.setLevel(level)
    if s["cmc_method"] == "sof":
        _match_ultralytics_cmc(tracker)
    return tracker


def _match_ultralytics_cmc(tracker) -> None:
    """boxmot's sparse-flow compensation with ultralytics' scale and corner settings.

    Left as boxmot has them: its optical-flow window (21x21, 3 levels: OpenCV's defaults,
    which ultralytics uses too) and its inlier checks, which ultralytics does not make.
    """
    cmc = getattr(tracker, "cmc", None)
    if cmc is None or not hasattr(cmc, "feature_params"):
        return
    cmc.scale = 0.5
    cmc.feature_params = dict(maxCorners=400, qualityLevel=0.01, minDistance=0, blockSize=3,
                              useHarrisDetector=False, k=0.04)


def by_frame(detections) -> dict[str, dict[int, np.ndarray]]:
    """clip -> frame -> rows ``x1, y1, x2, y2, conf, cls`` (float32, cache order) of a
    detection-cache DataFrame (microg4m.formats.detections.read_detections)."""
    out: dict[str, dict[int, np.ndarray]] = {}
    if not len(detections):
        return out
    values = detections[["x1", "y1", "x2", "y2", "conf", "cls"]].to_numpy(np.float32)
    for (clip, frame), idx in detections.groupby(["clip_id", "frame"], sort=False).indices.items():
        out.setdefault(str(clip), {})[int(frame)] = values[idx]
    return out


def _boxes(det: np.ndarray, shape: tuple[int, int]):
    from ultralytics.engine.results import Boxes

    return Boxes(det, shape)


def run(tracker, frames: Iterable[np.ndarray | None], detections: Mapping[int, np.ndarray], *,
        width: int, height: int) -> Iterator[tuple[int, np.ndarray]]:
    """Feed every frame (1-based) with its detections; yield ``(frame, output)``.

    ``detections[n]``: rows ``x1, y1, x2, y2, conf, cls`` in the model's order. ``frames``
    are the decoded frames (for camera-motion compensation) or None items (no
    compensation). ``output``: float32 rows ``x1, y1, x2, y2, id, conf, cls`` in the
    tracker's order, clipped to the frame (as ultralytics' ``Results.update`` does).
    """
    is_boxmot = not hasattr(tracker, "gmc")
    empty6 = np.empty((0, 6), dtype=np.float32)
    for n, frame in enumerate(frames, start=1):
        det = detections.get(n)
        det = empty6 if det is None or not len(det) else np.asarray(det, dtype=np.float32).reshape(-1, 6)
        if is_boxmot:
            img = frame if frame is not None else np.zeros((height, width, 3), np.uint8)
            res = np.asarray(tracker.update(det, img), dtype=np.float32)
        else:
            res = tracker.update(_boxes(det, (height, width)), frame)
        if res.size == 0:
            yield n, EMPTY
            continue
        rows = np.array(res.reshape(len(res), -1)[:, :7], dtype=np.float32)
        rows[:, [0, 2]] = rows[:, [0, 2]].clip(0, width)
        rows[:, [1, 3]] = rows[:, [1, 3]].clip(0, height)
        yield n, rows

