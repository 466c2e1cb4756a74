"""The reviewed captions and QA pairs: one JSON file under annotations/ (``vqa.reviews``).

Layout (``microg4m.vqa.rules.read_reviews`` reads it, the VQA export uses it)::

    {"version": 1, "clips": {"<clip>": {"caption": "...", "qa_pairs": [{"Q": "...", "A": "..."}],
      "reviewed": true, "reviewer": "alice", "updated": "<UTC time>",
      "draft": {"model": "...", "prompt_hash": "...", "time": "..."}}}}

Only a person's save on the page writes an entry; the drafting stage writes its drafts
under results/vqa_drafts/ and never this file, so a draft never overwrites a person's
edit. Every save re-reads the file under the folder lock that the labels use, checks the
rules (microg4m.vqa.rules), refuses a save based on an older version of the entry (another tab
or person saved in between) and writes the file back atomically.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

from microg4m.common.atomic import write_text
from microg4m.vqa.rules import VQAError, check_entry, read_drafts, read_reviews_doc
from .errors import Refused
from .results import Results
from .store import folder_lock

VERSION = 1
DRAFT_FIELDS = ("model", "prompt_hash", "time")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Drafts:
    """Clip id -> draft record from the drafts of the current units (``vqa_drafts/{unit}.json``,
    found through the results index: a draft file of an earlier plan is not read), read again
    when one of those files changed (their stamps as fresh as the index's view: see
    results_index, Freshness)."""

    def __init__(self, results: Results):
        self.results = results
        self._lock = threading.Lock()
        self._drafts: tuple[tuple | None, dict] = (None, {})

    def __call__(self) -> dict[str, dict]:
        index = self.results.index
        stamps = index.stamps("vqa_drafts")
        with self._lock:
            if stamps != self._drafts[0]:
                self._drafts = (stamps, read_drafts([index.files(u).vqa_drafts for u, st in stamps if st is not None]))
            return self._drafts[1]


class VQAStore:
    def __init__(self, results: Results, path: str | os.PathLike, annotator: str = ""):
        self.results = results
        self.path = Path(path)
        self.annotator = annotator or None
        self.drafts = Drafts(results)
        self.entries()  # a broken file stops the page at start, not at the first save

    # ------------------------------------------------------------ reading
    def _doc(self) -> dict:
        try:
            return read_reviews_doc(self.path)
        except VQAError as exc:
            raise Refused(500, str(exc)) from None

    def entries(self) -> dict[str, dict]:
        return self._doc()["clips"]

    def summary(self) -> dict[str, dict]:
        """Per clip on the page: whether a person saved it, reviewed it, and the draft's status."""
        entries, drafts = self.entries(), self.drafts()
        out = {}
        for cid in self.results.clips():
            e, d = entries.get(cid), drafts.get(cid)
            if e is None and d is None:
                continue
            out[cid] = {"edited": e is not None, "reviewed": bool(e and e.get("reviewed") is True),
                        "draft": d.get("status") if d else None}
        return out

    # ------------------------------------------------------------ saving
    def save(self, clip_id, caption, qa_pairs, reviewed, base=None, from_draft=False) -> dict:
        """Store a person's caption and pairs for a clip; returns the stored entry.

        ``base``: the ``updated`` time of the entry the page started from (None: none);
        a different one on disk means someone saved in between: refused (409).
        """
        self.results.clip(clip_id)
        if not isinstance(reviewed, bool):
            raise Refused(400, f"reviewed must be true or false, got {reviewed!r}")
        if base is not None and not isinstance(base, str):
            raise Refused(400, f"base must be the entry's updated time or null, got {base!r}")
        try:
            checked = check_entry({"caption": caption, "qa_pairs": qa_pairs, "reviewed": reviewed})
        except VQAError as exc:
            raise Refused(422, f"{clip_id}: {exc}") from None
        with folder_lock(self.path):
            doc = self._doc()
            current = doc["clips"].get(clip_id)
            on_disk = current.get("updated") if isinstance(current, dict) else None
            if on_disk != base:
                who = f" by {current.get('reviewer')}" if isinstance(current, dict) and current.get("reviewer") else ""
                raise Refused(409, f"{clip_id} was saved{who} at {on_disk} after this page loaded it; "
                                   f"reload the clip (your text is still in the editor)")
            provenance = current.get("draft") if isinstance(current, dict) else None
            if from_draft:
                d = self.drafts().get(clip_id)
                provenance = {k: d.get(k) for k in DRAFT_FIELDS} if d else provenance
            entry = {"caption": checked["caption"], "qa_pairs": checked["qa_pairs"], "reviewed": reviewed,
                     "reviewer": self.annotator, "updated": now(), "draft": provenance}
            doc["clips"][clip_id] = entry
            doc["clips"] = dict(sorted(doc["clips"].items()))
            doc = {"version": doc.get("version", VERSION), **{k: v for k, v in doc.items() if k != "version"}}
            write_text(self.path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return entry
