"""Lower precision only where it cannot change a result (``detect.exact_margin``).

BF16, FP16 and INT8 move every confidence a little, by an amount that depends on the
CPU's instructions (AVX-512 BF16 and AMX round differently). A box whose confidence moves
across a threshold that decides something changes a result: a person frame of the filter
(``filter.person_conf``), a track started or not (BoT-SORT's ``new_track_thresh``, and the
filter tracker's), a box matched first (``track_high_thresh``), a box recorded or not
(``track.record_conf``). Anywhere else a small move changes nothing but the box's last
digits.

So a frame inferred at low precision is inferred again at FP32 when one of its boxes has a
confidence within ``margin`` of one of those thresholds; its FP32 boxes replace the others.
With a margin larger than the precision's error on a confidence, every such decision is
FP32's, on any CPU.

Boxes are compared with the area thresholds too: a box whose share of the frame lies within
``AREA_MARGIN`` of ``track.closeup_area`` (the largest person above it is recorded alone)
flags its frame; BF16 moves a box's corners by a pixel or two.

Left out unless ``detect.exact_all``: the low confidence thresholds (the detector's own
0.1, ``track_low_thresh``, the filter tracker's low one) and the motion levels' ``min_area``
(a box of any class and confidence at least that large is a sighting of its track). A box
near the low thresholds is never recorded and never starts a track; it can only keep a
track associated for a frame; one near ``min_area`` can only add or miss one sighting.
Most frames hold such a box (clutter at 0.05-0.2 and of every size), and with them the
rule sent 62 % of the benchmark frames to FP32 (confidences alone;
bench/bench_precision_error.py, AMX BF16, margin 0.08), against 8.5 % without them: more
work than FP32 alone. With ``exact_all`` the low-precision pass runs at the detector's
threshold less the margin, so that a box just under it, which FP32 keeps, flags its frame.

The margins are above the precision's largest error on a confidence and on a box's share of
the frame measured by ``bench/bench_precision_error.py`` (FP32 against each precision on
the same frames of the package footage, boxes matched by IoU) on a CPU with AMX; on other
CPUs, not measured yet, they are twice as wide.
"""

from __future__ import annotations

import numpy as np

from microg4m.engines import hardware

SETTING = "detect.exact_margin"
# precision -> margin on a confidence and on a box's share of the frame (0: exactness off),
# above the largest error that bench/bench_precision_error.py measured on an Intel Xeon with
# AMX (2026-12-05, 399 frames: bf16 0.070 and 0.0101 over 625 matched boxes, int8 0.194 and
# 0.0296 over 639); fp16 as bf16, whose 8-bit mantissa errs more than fp16's 11 bits.
MARGIN_AMX = {"fp32": 0.0, "bf16": 0.08, "fp16": 0.08, "int8": 0.2}
AREA_MARGIN_AMX = {"fp32": 0.0, "bf16": 0.015, "fp16": 0.015, "int8": 0.04}
# Elsewhere (AVX-512 BF16 or VNNI without AMX) not measured yet: twice AMX's. On the demo
# frames of tests/test_runtime.py an AMD EPYC's BF16 moved a confidence 3x as far as AMX's
# (0.038 against 0.012). bench/bench_precision_error.py on such a CPU gives its own figures.
MARGIN_OTHER = {"fp32": 0.0, "bf16": 0.15, "fp16": 0.15, "int8": 0.4}
AREA_MARGIN_OTHER = {"fp32": 0.0, "bf16": 0.03, "fp16": 0.03, "int8": 0.08}
# this CPU's
MARGIN, AREA_MARGIN = ((MARGIN_AMX, AREA_MARGIN_AMX) if hardware.has("AMX-BF16")
                       else (MARGIN_OTHER, AREA_MARGIN_OTHER))


def margin(setting, precision: str, device: str = "cpu") -> float:
    """The margin for ``precision`` on ``device``: ``setting`` is ``auto`` (MARGIN's on a
    CPU; off on CUDA, where the margins were not measured), a number in [0, 1) (0: off),
    or None (off)."""
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
        return 0.0 if str(device).startswith("cuda") else MARGIN.get(precision, max(MARGIN.values()))
    return value


def check(exact: dict | None) -> None:
    """A bad ``detect.exact_margin`` is a ValueError naming it (before any work)."""
    if exact:
        margin(exact.get("margin"), "bf16")


def watch(exact: dict | None, precision: str, device: str, detector_thresholds=()) -> "Near | None":
    """What detect watches at ``precision`` on ``device`` (None: nothing, e.g. at FP32).

    ``exact``: the workflow's ``{"margin", "thresholds", "areas", "low", "low_thresholds",
    "low_areas"}`` (``low``: detect.exact_all); the filter tracker's thresholds are added,
    and with ``low`` the detector's own (``detector_thresholds``) and the low ones."""
    m = margin(exact.get("margin"), precision, device) if exact else 0.0
    if m <= 0:
        return None
    high, low = filter_tracker_thresholds()
    thresholds, areas = [*exact.get("thresholds", []), *high], list(exact.get("areas", []))
    if exact.get("low"):
        thresholds += [*detector_thresholds, *exact.get("low_thresholds", []), *low]
        areas += exact.get("low_areas", [])
    return Near(thresholds, m, areas, AREA_MARGIN.get(precision, max(AREA_MARGIN.values())))


def filter_tracker_thresholds() -> tuple[list[float], list[float]]:
    """The confidence thresholds of the tracker a bare ``model.track()`` gets from the
    installed ultralytics (the filter counts its boxes: filter.count tracked): (those that
    start a track or match it first, its low threshold)."""
    from ultralytics.cfg import get_cfg
    from ultralytics.utils import YAML
    from ultralytics.utils.checks import check_yaml

    cfg = YAML.load(check_yaml(get_cfg().tracker))
    high = [float(cfg[k]) for k in ("track_high_thresh", "new_track_thresh", "tai_thr") if k in cfg]
    return high, [float(cfg["track_low_thresh"])] if "track_low_thresh" in cfg else []


class Near:
    """Which frames have a box within ``margin`` of a confidence threshold, or (with
    ``areas``) whose share of the frame lies within ``area_margin`` of an area threshold."""

    def __init__(self, thresholds, margin: float, areas=(), area_margin: float = 0.0):
        self.thresholds = np.array(sorted({float(t) for t in thresholds}), np.float32)
        self.margin = float(margin)  # compared with float32 confidences as a float32 (NEP 50)
        self.areas = np.array(sorted({float(a) for a in areas}), np.float32)
        self.area_margin = float(area_margin)

    def __call__(self, boxes: np.ndarray, shape: tuple[int, ...] | None = None) -> bool:
        """``shape``: the frame's (height, width, ...), for the area thresholds."""
        if not len(boxes):
            return False
        if len(self.thresholds) and (np.abs(boxes[:, 4:5] - self.thresholds[None, :]) <= self.margin).any():
            return True
        if shape is None or not len(self.areas) or not self.area_margin:
            return False
        share = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) / np.float32(shape[0] * shape[1])
        return bool((np.abs(share[:, None] - self.areas[None, :]) <= self.area_margin).any())
