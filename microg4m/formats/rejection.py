"""When a clip is rejected whatever its remaining frames show: the filter's rule, shared by
the filter (to decide) and detect (to skip the frames such a clip does not need).

A clip is kept when it is not screened, has at most ``max_cuts`` scene cuts and a share
of person frames (a box of class 0 with conf > ``person_conf``) of at least
``min_person_share``. Both ways of counting (``filter.count``) count a frame only where
the detector found such a box in that frame (the tracker outputs a track only in a frame
where a detection updated it, with that detection's confidence), so after frame n with p
person frames, p + (frames - n) bounds the count from above: below the threshold, the
clip is rejected ("few_persons") whatever frames n+1... show.

With a threshold on the quality scores set (``filter.max_text_share``, ``min_sharpness``,
...: microg4m.formats.quality_rules), a clip whose scores break one is rejected for it
whatever its frames show, as a screened clip or one with a cut is: the quality stage
scores every clip before detect runs, so detect runs no frame of such a clip.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from microg4m.formats.detections import PERSON
from microg4m.formats.quality_rules import QualityRules

EPS = 1e-9  # 54/90 must count as >= 0.6 whatever the float rounding


def too_few(person_frames: int, frames: int, min_person_share: float) -> bool:
    """A share of ``person_frames`` / ``frames`` below ``min_person_share``."""
    return person_frames / frames + EPS < min_person_share


@dataclass(frozen=True)
class Rejection:
    """The filter's settings and a unit's cuts, screened clips and quality reasons, as detect needs them."""

    cuts: dict  # clip -> number of scene cuts
    screened: frozenset = frozenset()
    person_conf: float = 0.6
    min_person_share: float = 0.6
    max_cuts: int = 0
    quality: dict = field(default_factory=dict)  # clip -> the quality reason its scores break (text, ...)

    @classmethod
    def of(cls, scenes, *, screened=(), person_conf: float = 0.6, min_person_share: float = 0.6,
           max_cuts: int = 0, quality=None, **thresholds) -> "Rejection":
        """The rule for the clips of a scenes table (the scenes stage's file) and, with a
        quality threshold of ``thresholds`` set, of the unit's quality table (``quality``)."""
        from microg4m.formats.scenes import read_scenes

        table = read_scenes(scenes)
        return cls(cuts=dict(zip(table["clip_id"], table["cuts"].map(len))), screened=frozenset(screened),
                   person_conf=float(person_conf), min_person_share=float(min_person_share), max_cuts=int(max_cuts),
                   quality=quality_reasons(quality, QualityRules(**thresholds)))

    def whole(self, clip: str) -> bool:
        """Rejected whatever its frames show (screened, too many cuts, or a quality threshold broken)."""
        return clip in self.screened or self.cuts.get(clip, 0) > self.max_cuts or clip in self.quality

    def person(self, boxes: np.ndarray) -> bool:
        """Whether a frame's boxes (x1, y1, x2, y2, conf, cls) count as a person frame."""
        return bool(len(boxes)) and bool(((boxes[:, 5] == PERSON) & (boxes[:, 4] > self.person_conf)).any())

    def hopeless(self, person_frames: int, n: int, frames: int) -> bool:
        """After frame ``n`` of ``frames`` with ``person_frames``: rejected even if every later frame counted."""
        return too_few(person_frames + frames - n, frames, self.min_person_share)


def quality_reasons(quality, rules: QualityRules) -> dict[str, str]:
    """clip -> the reason its scores in the quality table at ``quality`` break ``rules``
    (only clips that break one); empty when no threshold is set."""
    if not rules.active():
        return {}
    if quality is None:
        raise ValueError("a quality threshold of filter.* is set but no quality table was given")
    from microg4m.formats.quality import read_quality

    out = {}
    for clip, row in read_quality(quality).set_index("clip_id").to_dict("index").items():
        reason = rules.reason(row)
        if reason:
            out[clip] = reason
    return out
