"""The adjudication pages' lists (every assigned clip with its status) and their agreement
figures, kept between requests.

Made afresh, a list and its figures cost time in proportion to all the clips and all the
labels (at 47,590 clips, seconds of CPU that the annotators' requests wait for). Here each
clip's part (report.ClipPart for the labels, text_agreement.TextPart for the captions)
is kept, with its entry of the list as JSON text, and a request makes again only the parts
that may have changed:

* the clips with new history rows (of the kinds the list shows) since the last request,
  whoever wrote them;
* when the results index's token changed (clips, decisions, tracks) or the assignments or
  the accounts changed: every assigned clip's persons and annotators are compared with
  those its part was made from (and for the captions, its draft), and only the parts that
  differ are made again; a clip no longer assigned is taken out.

The label figures are sums over the parts (report.Sums), kept up to date by taking a
changed part out and adding its new one; the caption figures are made from the kept parts
(from_parts, over the reviewed versions only). When nothing changed, the kept list is paged
again (pages.py: a request gets one page of it).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from . import accounts, history, report, text_agreement, vqa_review
from ..pages import Listing
from .db import FINAL
from .decisions import Snapshot

BATCH = 50  # more parts to make again than this: read every clip's values at once


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"))


class _Kept:
    """What the two lists share: which clips to make again since the last request."""

    kinds: tuple[str, ...] = ()  # the history kinds the list shows

    def __init__(self, project):
        self.project = project
        self.lock = threading.Lock()
        self.seq = 0
        self.key: tuple | None = None  # (index token, assigned, annotators) of the parts
        self.parts: dict = {}  # clip -> (part, inputs it was made from, entry JSON)
        self.view: Listing | None = None  # the parts' entries, sorted by clip (None: to be made again)

    def changes(self, conn: sqlite3.Connection):
        """(view, assigned, annotators, the clips to look at, the history seq now)."""
        view = self.project.results.view()
        assigned = self.project.assigned(conn)
        annotators = accounts.annotators(conn)
        top = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0]
        marks = ",".join("?" * len(self.kinds))
        changed = {r[0] for r in conn.execute(
            f"SELECT DISTINCT clip_id FROM changes WHERE seq > ? AND seq <= ? AND kind IN ({marks})",
            (self.seq, top, *self.kinds))}
        key = (view.token, assigned, annotators)
        if self.key is None or key[0] != self.key[0] or key[1] is not self.key[1] or key[2] != self.key[2]:
            look = set(assigned)
            for c in [c for c in self.parts if c not in assigned]:
                self.drop(c)
        else:
            look = {c for c in changed if c in assigned}
        return view, assigned, annotators, look, changed, top, key

    def keep(self, clip: str, kept: tuple) -> None:
        """``kept``: (part, the inputs it was made from, its entry JSON); a clip already
        listed has its entry changed in place."""
        i = None if self.view is None or clip not in self.parts else self.view.where(clip)
        self.parts[clip] = kept
        if i is None:
            self.view = None
        else:
            self.view.set(i, kept[2], kept[0].status)

    def drop(self, clip: str) -> None:
        if self.parts.pop(clip, None) is not None:
            self.view = None

    def listing(self) -> Listing:
        if self.view is None:
            order = sorted(self.parts)
            self.view = Listing(order, [self.parts[c][2] for c in order], [self.parts[c][0].status for c in order])
        return self.view


class ActionAdjudication(_Kept):
    """``/api/adjudication``: clip entries, counts per status, the agreement figures."""

    kinds = ("actions", "exclusion", "note", "resolved")

    def __init__(self, project):
        super().__init__(project)
        self.sums: report.Sums | None = None
        self.figures: dict | None = None  # as_json of the sums (None: to be made)

    def get(self, conn: sqlite3.Connection) -> tuple[Listing, dict, dict]:
        """(the clips' Listing, counts per status, the figures as the page shows them)."""
        with self.lock:
            view, assigned, annotators, look, changed, top, key = self.changes(conn)
            if self.sums is None or self.sums.annotators != annotators:  # the files compared changed
                self.sums, self.parts, self.view, look = report.Sums(annotators), {}, None, set(assigned)
                self.figures = None
            stale = []
            for c in look:
                inputs = (view.persons(c), assigned[c])
                kept = self.parts.get(c)
                if kept is None or c in changed or kept[1] != inputs:
                    stale.append((c, inputs))
            snap = finals = None
            if len(stale) > BATCH:
                snap, finals = Snapshot.read(conn), {}
                for (c, p), acts in snap.layer_actions(FINAL).items():
                    finals.setdefault(c, {})[p] = acts
            for c, (persons, names) in stale:
                part = report.clip_part(snap or Snapshot.read(conn, clip_id=c), c, persons, names, annotators,
                                        None if finals is None else finals.get(c, {}))
                self.put(c, part, (persons, names), _dumps({
                    "clip_id": c, "status": part.status, "annotators": part.names, "persons": len(part.persons),
                    "final_by": part.final_by}))
            self.seq, self.key = top, key
            if self.figures is None:
                self.figures = report.as_json(self.sums.tables(self.project.label_map,
                                                               Path(self.project.settings.report_dir),
                                                               history.outcomes(conn)))
            return self.listing(), dict(self.sums.counts), self.figures

    def put(self, clip: str, part, inputs, entry: str) -> None:
        old = self.parts.get(clip)
        if old is not None:
            self.sums.add(old[0], -1)
        self.sums.add(part)
        self.keep(clip, (part, inputs, entry))
        self.figures = None

    def drop(self, clip: str) -> None:
        old = self.parts.get(clip)
        if old is not None:
            self.sums.add(old[0], -1)
            self.figures = None
        super().drop(clip)


class TextAdjudication(_Kept):
    """``/api/text-adjudication``: clip entries, counts per status, the text figures."""

    kinds = vqa_review.KINDS

    def __init__(self, project):
        super().__init__(project)
        self.reviewers: list[str] | None = None
        self.drafts: dict | None = None  # the drafts the parts were made with
        self.figures: dict | None = None
        self.counts: dict = {}

    def get(self, conn: sqlite3.Connection) -> tuple[Listing, dict, dict]:
        with self.lock:
            view, assigned, annotators, look, changed, top, key = self.changes(conn)
            drafts = self.project.drafts()
            if self.reviewers != annotators:
                self.reviewers, self.parts, self.view, look = annotators, {}, None, set(assigned)
                self.figures = None
            if drafts is not self.drafts:  # a drafts file was read again
                self.drafts, look = drafts, set(assigned)
            stale = []
            for c in look:
                inputs = (assigned[c], drafts.get(c))
                kept = self.parts.get(c)
                if kept is None or c in changed or kept[1][0] != inputs[0] or kept[1][1] is not inputs[1]:
                    stale.append((c, inputs))
            texts = vqa_review.read(conn) if len(stale) > BATCH else None
            empty = vqa_review.ClipTexts()
            for c, (names, draft) in stale:
                ct = texts.get(c, empty) if texts is not None else vqa_review.read_clip(conn, c)
                part = text_agreement.clip_part(c, ct, names, draft, annotators)
                self.keep(c, (part, (names, draft), _dumps({
                    "clip_id": c, "status": part.status, "reviewers": part.names, "final_by": part.final_by})))
                self.figures = None
            self.seq, self.key = top, key
            if self.figures is None:
                self.counts = {s: 0 for s in vqa_review.STATUSES}
                for part, _, _ in self.parts.values():
                    self.counts[part.status] += 1
                self.figures = text_agreement.as_json(text_agreement.from_parts(
                    [self.parts[c][0] for c in sorted(self.parts)], annotators, clip_rows=False))
            return self.listing(), dict(self.counts), self.figures

    def drop(self, clip: str) -> None:
        self.figures = None
        super().drop(clip)
