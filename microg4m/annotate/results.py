"""Read-only view of a run's results folder: the clips on the page and their boxes.

A clip is on the page when trim made it (status ok) and the filter kept it, or when the
filter rejected it as ``screened`` (so that an exclusion can be undone). The clips, their
units and their boxes come from the results index (microg4m.formats.results_index), which
re-reads a file when it changes on disk (a re-run of the workflow).

The pages are long-running servers: their index looks at every unit's files at most once
per :data:`RECHECK_SECONDS` (and whenever the stamp of one of the results folder's
per-unit folders changed, as every atomic write of the workflow changes it); a call on one
clip (its persons before a label is saved, its boxes) is always exact. See the index's
docstring, Freshness.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from microg4m.formats.results_index import Clip, ResultsIndex, View
from .errors import Refused

__all__ = ["Clip", "Results"]
RECHECK_SECONDS = 1.0  # the staleness bound of whole-folder reads (in-place edits, manifests)


def on_page(clip: Clip) -> bool:
    """Trimmed, and kept by the filter or excluded by hand (``screened``: it can come back)."""
    return clip.status == "ok" and (clip.keep is True or clip.reason == "screened")


class Results:
    def __init__(self, root: str | os.PathLike, max_age: float = RECHECK_SECONDS):
        self.index = ResultsIndex(root, max_age)
        self.root = self.index.root
        self._lock = threading.Lock()
        self._page: tuple[dict | None, dict[str, Clip]] = (None, {})
        if not self.index.planned() and not self.index.units():  # fail early on a folder without manifests
            raise ValueError(f"{self.root}: no clips/*/manifest.tsv (not the results folder of a run?)")

    def clips(self) -> dict[str, Clip]:
        """Clips on the page, by id, in clip-id order (re-read when a table changed)."""
        return self._on_page(self._index(self.index.clips))

    def view(self) -> View:
        """The index's view (``token``, ``persons``) with the clips on the page as ``clips``."""
        v = self._index(self.index.view)
        return View(self.index, v.token, self._on_page(v.clips))

    def _on_page(self, every: dict[str, Clip]) -> dict[str, Clip]:
        """The clips on the page among ``every`` (the index's clips; the same dict while they are)."""
        with self._lock:
            if self._page[0] is not every:
                self._page = (every, {c: clip for c, clip in every.items() if on_page(clip)})
            return self._page[1]

    def problems(self) -> list[str]:
        return self._index(self.index.problems)

    def clip(self, clip_id: str) -> Clip:
        """The clip, or :class:`Refused` (404) for any id that is not a clip on the page."""
        clip = self._index(self.index.get, clip_id)
        if clip is None or not on_page(clip):
            raise Refused(404, f"unknown clip {clip_id!r} (not a kept clip of {self.root})")
        return clip

    def boxes(self, clip_id: str) -> dict[int, list[tuple]]:
        """Frame (1-based) -> ``[(person_id, x1, y1, x2, y2), ...]`` in pixels (2 decimals)."""
        self.clip(clip_id)
        return self._index(self.index.boxes, clip_id)

    def persons(self, clip_id: str) -> list[int]:
        """Person ids with at least one box in the clip (its unit's final tracks), ascending."""
        self.clip(clip_id)
        return self._index(self.index.persons, clip_id)

    def track_rows(self, clip_id: str) -> np.ndarray:
        self.clip(clip_id)
        return self._index(self.index.track_rows, clip_id)

    @staticmethod
    def _index(call, *args):
        """A call on the index; a file it cannot read is a server error naming the file."""
        try:
            return call(*args)
        except (OSError, ValueError) as exc:
            raise Refused(500, str(exc)) from None
