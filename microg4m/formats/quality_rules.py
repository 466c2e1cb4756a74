"""The filter's thresholds on the quality scores (microg4m.formats.quality): each one set
turns a score into a rejection reason with its own name. All are off (None) by default:
the quality stage only scores.

| threshold | reason | a clip is rejected when |
|---|---|---|
| ``max_text_share`` | ``text`` | its ``text_share`` is above it |
| ``max_text_area`` | ``text`` | its ``text_area`` is above it |
| ``camera`` | ``camera`` | its ``camera`` class is one of the listed ones |
| ``max_camera_magnitude`` | ``camera`` | its ``camera_magnitude`` is above it |
| ``min_sharpness`` | ``blurry`` | its ``sharpness`` is below it |
| ``min_exposure`` / ``max_exposure`` | ``exposure`` | its ``exposure`` is below / above it |
| ``max_clipped`` | ``exposure`` | its ``clipped`` share is above it |

Reasons are checked in the order text > camera > blurry > exposure, after screened and
scene_cut and before few_persons: like a cut they are known before detect runs, which then
runs no frame of such a clip (microg4m.formats.rejection).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from microg4m.formats.quality import CAMERA

REASONS = ("text", "camera", "blurry", "exposure")
SHARES = ("max_text_share", "max_text_area", "max_camera_magnitude", "min_exposure", "max_exposure", "max_clipped")


@dataclass(frozen=True)
class QualityRules:
    max_text_share: float | None = None
    max_text_area: float | None = None
    camera: tuple | list | None = None
    max_camera_magnitude: float | None = None
    min_sharpness: float | None = None
    min_exposure: float | None = None
    max_exposure: float | None = None
    max_clipped: float | None = None

    def __post_init__(self):
        for name in SHARES:
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1):
                raise ValueError(f"filter.{name} = {v!r}: expected null or a number in [0, 1]")
        v = self.min_sharpness
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
            raise ValueError(f"filter.min_sharpness = {v!r}: expected null or a number >= 0")
        if self.camera is not None:
            if isinstance(self.camera, str) or not all(isinstance(c, str) for c in self.camera):
                raise ValueError(f"filter.camera = {self.camera!r}: expected null or a list of camera classes")
            bad = sorted(set(self.camera) - set(CAMERA))
            if bad:
                raise ValueError(f"filter.camera = {list(self.camera)!r}: unknown classes {bad}; "
                                 f"known: {', '.join(CAMERA)}")

    def active(self) -> bool:
        """Whether any threshold is set (then the filter needs the quality table)."""
        return any(getattr(self, f.name) is not None for f in fields(self))

    def reason(self, s: dict) -> str | None:
        """The rejection reason of a clip's scores (a quality table's row), or None."""
        def above(key, limit):
            return limit is not None and s[key] > limit

        def below(key, limit):
            return limit is not None and s[key] < limit

        if above("text_share", self.max_text_share) or above("text_area", self.max_text_area):
            return "text"
        if (self.camera is not None and s["camera"] in self.camera) \
                or above("camera_magnitude", self.max_camera_magnitude):
            return "camera"
        if below("sharpness", self.min_sharpness):
            return "blurry"
        if below("exposure", self.min_exposure) or above("exposure", self.max_exposure) \
                or above("clipped", self.max_clipped):
            return "exposure"
        return None


THRESHOLDS = tuple(f.name for f in fields(QualityRules))
