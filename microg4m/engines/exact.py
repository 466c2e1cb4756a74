"""Lower precision only where it cannot change a result (``detect.exact_margin``).

BF16, FP16 and INT8 move every confidence a little, by an amount that depends on the
CPU's instructions (AVX-512 BF16 and AMX round differently). A box whose confidence moves
across a threshold that decides something changes a result; anywhere else a small move
changes nothing but the box's last digits. So a frame inferred at low precision is
inferred again at FP32 when one of its boxes has a confidence within the margin of a
threshold that decides something there; its FP32 boxes replace the others. With a margin
larger than the precision's error on a confidence, every such decision is FP32's, on any
CPU.

Which thresholds decide something depends on the frame (``Watch``):

- ``every`` frame detect runs: the filter's. A person frame (``filter.person_conf``, on
  person boxes), and with ``filter.count: tracked`` the tracker a bare ``model.track()``
  gets (its ``track_high_thresh`` and ``new_track_thresh``, on every class). They decide
  the share of person frames, so also where detect stops a hopeless clip.
- ``kept``: every frame of a clip the filter may keep, i.e. one that detect ran to its
  end (a clip stopped as hopeless, or rejected before detect, is never tracked): the
  track stage's BoT-SORT (``track_high_thresh``, ``new_track_thresh``, every class).
  Such a frame is inferred again when its clip ends, and not at all if the clip stops.
- ``refresh``: the frames of such a clip at which the track stage records boxes (the
  multiples of the motion levels' ``interval``; the level is not known yet, so both):
  ``track.record_conf`` (person boxes) and ``track.closeup_area`` (the share of the frame
  of a person box that may be confident, i.e. within the margin of ``record_conf`` or
  above; BF16 moves a box's corners by a pixel or two).

Left out unless ``detect.exact_all``: the low confidence thresholds (the detector's own
0.1 and the filter tracker's, checked on every frame; ``track_low_thresh``, on the frames
of kept clips) and the motion levels' ``min_area`` (a box of any class and confidence at
least that large is a sighting of its track; at refresh frames). A box near the low
thresholds is never recorded and never starts a track; it can only keep a track
associated for a frame; one near ``min_area`` can only add or miss one sighting. Most
frames hold such a box (clutter at 0.05-0.2 and of every size), and with them the rule
sent 62 % of the benchmark frames to FP32 (confidences alone; bench/bench_precision_error.py,
AMX BF16, margin 0.08), against 8.5 % without them: more work than FP32 alone. With
``exact_all`` the low-precision pass runs at the detector's threshold less the margin, so
that a box just under it, which FP32 keeps, flags its frame.

The margins (``auto``) come from ``bench/bench_precision_error.py`` (FP32 against each
precision on the same frames of the package footage, boxes matched by IoU), per kind of CPU
(``cpu_kind``), since the rounding is the instructions':

- where it measured the error by the confidence of the box (``BAND_ERRORS``: the largest
  error in each band of FP32 confidence), a margin per threshold. A box whose FP32
  confidence lies at a distance d from a threshold t crosses it unseen (its low-precision
  confidence on the other side of t and farther than the margin m) only if its error exceeds
  d + m; so m(t) is the largest, over the bands, of ``SAFETY`` times the band's error less
  the band's distance to t. BF16 errs less on confident boxes (the sigmoid flattens), so a
  high threshold gets a narrower margin than one at 0.5;
- where it measured one largest error over every box (``FLAT``: AMX), that, rounded up;
- elsewhere (``FLAT["other"]``, not measured) twice AMX's.
"""

from __future__ import annotations

import numpy as np

from microg4m.engines import hardware

SETTING = "detect.exact_margin"
PERSON = 0  # the person class (microg4m.formats.detections.PERSON)

# The margin at a threshold t: max over the bands of SAFETY x (the band's largest error) - (the
# distance from t to the band). SAFETY 2: within 0.15 of each threshold of the default config
# lay only 120 to 300 of the measured boxes, so their largest error is about their 99th
# percentile, not the largest there is (over every box the largest error, 0.094, is 3.7 times
# the 99th percentile).
SAFETY = 2.0
BAND = 0.05  # BAND_ERRORS: band k holds FP32 confidences [k * BAND, (k + 1) * BAND)

# (CPU kind, precision) -> the largest |conf - FP32's| per band of FP32 confidence, as
# bench/bench_precision_error.py --frames 400 --precision bf16 printed it on an AMD EPYC (AVX2,
# AVX-512, AVX-512 BF16, VNNI; not AVX-512 FP16, AMX), 2026-12-06: 1,569 frames of the package
# footage, 2,399 matched boxes with a confidence of 0.05 or more (p50 0.0014, p99 0.025,
# largest 0.094 at 0.15-0.2; 0.073 at 0.40-0.45, 0.053 at 0.50-0.55, 0.033 at 0.55-0.60,
# 0.016-0.019 at 0.65-0.85, under 0.01 above 0.85, no box above 0.95: taken as the largest);
# a box's share of the frame: largest 0.0176. So bf16's margins there: 0.139 at 0.1 and 0.25
# (exact_all), 0.106 at 0.5 and 0.55, 0.066 at 0.6, 0.037 at 0.7; 0.035 on the area.
BAND_ERRORS = {
    ("avx512_bf16", "bf16"): (
        0.0498, 0.0564, 0.0332, 0.0943, 0.0308, 0.0235, 0.0334, 0.0304, 0.0727, 0.0461,
        0.0531, 0.0329, 0.0280, 0.0159, 0.0186, 0.0158, 0.0168, 0.0091, 0.0033, 0.0),
}
AREA_ERRORS = {("avx512_bf16", "bf16"): 0.0176}  # the largest error on a box's share of the frame, same run

# CPU kind -> precision -> one margin for every threshold, and for a box's share of the frame.
# "amx": above the largest error that bench/bench_precision_error.py measured on an Intel Xeon
# with AMX (2026-12-05, 399 frames: bf16 0.070 and 0.0101 over 625 matched boxes, int8 0.194
# and 0.0296 over 639); fp16 as bf16, whose 8-bit mantissa errs more than fp16's 11 bits.
# "other" (kinds nobody measured: fp16 and int8 without AMX, and every precision on the
# AVX-512 BF16 kind but bf16): twice AMX's. Without AVX-512 BF16 or AMX there is no bf16
# (microg4m.engines.runtime refuses it, and precision auto is fp32 there).
FLAT = {
    "amx": ({"fp32": 0.0, "bf16": 0.08, "fp16": 0.08, "int8": 0.2},
            {"fp32": 0.0, "bf16": 0.015, "fp16": 0.015, "int8": 0.04}),
    "other": ({"fp32": 0.0, "bf16": 0.15, "fp16": 0.15, "int8": 0.4},
              {"fp32": 0.0, "bf16": 0.03, "fp16": 0.03, "int8": 0.08}),
}


def cpu_kind() -> str:
    """``amx`` (AMX-BF16), ``avx512_bf16`` (AVX-512 BF16 without AMX) or ``other``: the
    kinds of CPU whose low-precision rounding differs (microg4m.engines.hardware)."""
    if hardware.has("AMX-BF16"):
        return "amx"
    return "avx512_bf16" if hardware.has("AVX-512 BF16") else "other"


def auto_margin(threshold: float, precision: str, kind: str | None = None) -> float:
    """The margin ``auto`` takes at ``threshold`` for ``precision`` on a CPU of ``kind``
    (None: this one's)."""
    kind = kind or cpu_kind()
    if precision == "fp32":
        return 0.0
    bands = BAND_ERRORS.get((kind, precision))
    if bands is None:
        flat = FLAT.get(kind, FLAT["other"])[0]
        return flat.get(precision, max(flat.values()))
    largest = max(bands)  # a band without a measured box: the largest error measured anywhere
    edges = np.arange(len(bands)) * BAND
    distance = np.maximum(0.0, np.maximum(edges - threshold, threshold - (edges + BAND)))
    return round(max(0.0, float(np.max(SAFETY * np.array([e or largest for e in bands]) - distance))), 4)


def auto_area_margin(precision: str, kind: str | None = None) -> float:
    """The margin ``auto`` takes on a box's share of the frame."""
    kind = kind or cpu_kind()
    if (kind, precision) in AREA_ERRORS:
        return round(SAFETY * AREA_ERRORS[kind, precision], 4)
    flat = FLAT.get(kind, FLAT["other"])[1]
    return flat.get(precision, max(flat.values()))


def margin(setting, precision: str, device: str = "cpu", threshold: float = 0.5) -> float:
    """The margin at ``threshold`` for ``precision`` on ``device``: ``setting`` is ``auto``
    (auto_margin on a CPU; off on CUDA, where the margins were not measured), a number in
    [0, 1) (0: off), the same at every threshold, or None (off)."""
    auto = str(setting).strip().lower() == "auto"
    if not auto:
        try:
            value = float(setting) if setting is not None and not isinstance(setting, bool) else -1.0
        except (TypeError, ValueError):
            value = -1.0
        if setting is not None and not 0.0 <= value < 1.0:
            raise ValueError(f"{SETTING} = {setting!r}: expected auto or a number in [0, 1) (0: off)")
    if setting is None or precision == "fp32":
        return 0.0
    if auto:
        return 0.0 if str(device).startswith("cuda") else auto_margin(threshold, precision)
    return value


def check(exact: dict | None) -> None:
    """A bad ``detect.exact_margin`` is a ValueError naming it (before any work)."""
    if exact:
        margin(exact.get("margin"), "bf16")


def watch(exact: dict | None, precision: str, device: str, detector_thresholds=()) -> "Watch | None":
    """What detect watches at ``precision`` on ``device`` (None: nothing, e.g. at FP32).

    ``exact``: the workflow's ``{"margin", "low" (detect.exact_all), "person_conf",
    "count" (filter.count), "tracker": [track_high_thresh, new_track_thresh],
    "tracker_low": [track_low_thresh], "record_conf", "closeup_area", "min_areas": [the
    motion levels' min_area], "intervals": [the motion levels' interval]}``; with ``count``
    tracked the filter tracker's thresholds are added, and with ``low`` the detector's own
    (``detector_thresholds``) and the low ones."""
    setting = exact.get("margin") if exact else None
    if margin(setting, precision, device) <= 0:
        return None
    m = lambda ts: [margin(setting, precision, device, t) for t in ts]  # noqa: E731
    area_margin = auto_area_margin(precision)
    low = bool(exact.get("low"))
    every = [Near([exact["person_conf"]], m([exact["person_conf"]]), classes=(PERSON,))]
    if exact.get("count", "tracked") == "tracked":
        high, tracker_low = filter_tracker_thresholds()
        counted = high + (tracker_low if low else [])
        every.append(Near(counted, m(counted)))
    if low:
        every.append(Near(detector_thresholds, m(detector_thresholds)))
    tracker = [*exact["tracker"], *(exact.get("tracker_low", []) if low else [])]
    kept = [Near(tracker, m(tracker))]
    record_conf = float(exact["record_conf"])
    record_margin = margin(setting, precision, device, record_conf)
    refresh = [Near([record_conf], [record_margin], classes=(PERSON,)),
               # a close-up is the largest confident person: a box that may be confident
               Near([], 0.0, [exact["closeup_area"]], area_margin, classes=(PERSON,),
                    min_conf=record_conf - record_margin)]
    if low:
        refresh.append(Near([], 0.0, exact.get("min_areas", []), area_margin))
    return Watch(every, kept, refresh, exact.get("intervals", ()))


def settings(config: dict) -> dict | None:
    """The ``exact`` of detect.run from a whole config (the workflow's detect params): the
    thresholds of filter and track, each with where it decides something; None at FP32
    (``detect.precision`` default or fp32), so that their edits never touch detect there."""
    if config["detect"]["precision"] in ("default", "fp32"):
        return None
    t = config["track"]
    levels = (t["low_motion"], t["high_motion"])
    return dict(
        margin=config["detect"]["exact_margin"],
        low=config["detect"]["exact_all"],
        # the filter's, on every frame detect runs
        person_conf=float(config["filter"]["person_conf"]),
        count=config["filter"]["count"],
        # the track stage's BoT-SORT, on every frame of a clip the filter may keep
        tracker=[float(t["botsort"][k]) for k in ("track_high_thresh", "new_track_thresh")],
        tracker_low=[float(t["botsort"]["track_low_thresh"])],
        # its record rules, on the frames it records at
        record_conf=float(t["record_conf"]),
        closeup_area=float(t["closeup_area"]),
        min_areas=[float(level["min_area"]) for level in levels],
        intervals=[int(level["interval"]) for level in levels],
    )


def filter_tracker_thresholds() -> tuple[list[float], list[float]]:
    """The confidence thresholds of the tracker a bare ``model.track()`` gets from the
    installed ultralytics (the filter counts its boxes: filter.count tracked): (those that
    start a track or match it first, its low threshold). Not TrackTrack's ``tai_thr``: an
    overlap, not a confidence."""
    from ultralytics.cfg import get_cfg
    from ultralytics.utils import YAML
    from ultralytics.utils.checks import check_yaml

    cfg = YAML.load(check_yaml(get_cfg().tracker))
    high = [float(cfg[k]) for k in ("track_high_thresh", "new_track_thresh") if k in cfg]
    return high, [float(cfg["track_low_thresh"])] if "track_low_thresh" in cfg else []


class Near:
    """Which frames have a box within its threshold's margin of a confidence threshold, or
    (with ``areas``) whose share of the frame lies within ``area_margin`` of an area
    threshold. ``margin``: one number, or one per threshold; ``classes``: the boxes of these
    classes only (None: every class); ``min_conf``: for the areas, the boxes above it only."""

    def __init__(self, thresholds, margin, areas=(), area_margin: float = 0.0, *, classes=None,
                 min_conf: float | None = None):
        thresholds = [float(t) for t in thresholds]
        margins = [float(m) for m in margin] if np.ndim(margin) else [float(margin)] * len(thresholds)
        pairs = sorted(set(zip(thresholds, margins)))
        # compared with float32 confidences as float32s (NEP 50)
        self.thresholds = np.array([t for t, _ in pairs], np.float32)
        self.margins = np.array([m for _, m in pairs], np.float32)
        self.areas = np.array(sorted({float(a) for a in areas}), np.float32)
        self.area_margin = float(area_margin)
        self.classes = None if classes is None else np.array(sorted(classes), np.float32)
        self.min_conf = None if min_conf is None else np.float32(min_conf)

    def __call__(self, boxes: np.ndarray, shape: tuple[int, ...] | None = None) -> bool:
        """``shape``: the frame's (height, width, ...), for the area thresholds."""
        if len(boxes) and self.classes is not None:
            boxes = boxes[np.isin(boxes[:, 5], self.classes)]
        if not len(boxes):
            return False
        if len(self.thresholds) and (np.abs(boxes[:, 4:5] - self.thresholds[None, :]) <= self.margins[None, :]).any():
            return True
        if shape is None or not len(self.areas) or not self.area_margin:
            return False
        if self.min_conf is not None:
            boxes = boxes[boxes[:, 4] > self.min_conf]
        share = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) / np.float32(shape[0] * shape[1])
        return bool((np.abs(share[:, None] - self.areas[None, :]) <= self.area_margin).any())

    def describe(self) -> dict:
        """What it watches (JSON-able: a part of the frame cache's key)."""
        return {"thresholds": self.thresholds.tolist(), "margins": self.margins.tolist(),
                "areas": self.areas.tolist(), "area_margin": self.area_margin,
                "classes": None if self.classes is None else self.classes.tolist(),
                "min_conf": None if self.min_conf is None else float(self.min_conf)}


EVERY, KEPT = "every", "kept"


class Watch:
    """Which frames of a low-precision pass detect infers again at FP32, and when: ``EVERY``
    (now: a frame with a box near a threshold of the filter), ``KEPT`` (when its clip ends
    unstopped: near a threshold of the track stage, on any frame, or of its record rules,
    on a refresh frame), or None."""

    def __init__(self, every: list[Near], kept: list[Near], refresh: list[Near], intervals=()):
        self.every, self.kept, self.refresh = every, kept, refresh
        self.intervals = sorted({int(i) for i in intervals})

    def __call__(self, boxes: np.ndarray, shape: tuple[int, ...], n: int) -> str | None:
        """For frame ``n`` (1-based) of its clip, of ``shape``, with ``boxes``."""
        if any(w(boxes, shape) for w in self.every):
            return EVERY
        if any(w(boxes, shape) for w in self.kept):
            return KEPT
        if any(n % i == 0 for i in self.intervals) and any(w(boxes, shape) for w in self.refresh):
            return KEPT
        return None

    @property
    def margin(self) -> float:
        """The widest margin on a confidence."""
        return round(max((float(w.margins.max()) for w in self.every + self.kept + self.refresh if len(w.margins)),
                         default=0.0), 4)

    def margins(self) -> dict[str, float]:
        """threshold -> margin, for the log."""
        return {f"{t:g}": round(float(m), 4) for w in self.every + self.kept + self.refresh
                for t, m in zip(w.thresholds.tolist(), w.margins.tolist())}

    def describe(self) -> dict:
        """What it watches (JSON-able: a part of the frame cache's key)."""
        return {"every": [w.describe() for w in self.every], "kept": [w.describe() for w in self.kept],
                "refresh": [w.describe() for w in self.refresh], "intervals": self.intervals}
