"""The clip list of an annotator's ``/api/state``, kept between requests.

The page lists every clip of the annotator's queue (about a thousand each at the paper's
scale), each with its persons and whether the annotator is done with it. Made afresh on
every request, that list costs time in proportion to the queue and to the annotator's
labels (reading them all, a dict per clip, the JSON). Here each clip's entry is kept as
its JSON text, per annotator, and made again only when something it shows may have
changed: the clip (its manifest row and filter decision) or its persons (the tracks) are
not those it was made from, or the annotator's layer has history rows for the clip after
the last row seen (whoever wrote them: this server, another process, ``microg4m team
rebuild``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass, field

from ..api import clip_state
from .decisions import Snapshot

BATCH = 20  # more clips to make again than this: read the annotator's labels at once


@dataclass
class _List:
    seq: int = 0  # the last history row taken into account
    entries: dict[str, tuple] = field(default_factory=dict)  # clip -> (Clip, persons, entry JSON, done)
    shown: list[str] = field(default_factory=list)  # the clips of the last answer, in order
    text: str = "[]"  # the last answer's JSON array
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ClipLists:
    def __init__(self, results):
        self.results = results
        self._lock = threading.Lock()
        self._lists: dict[str, _List] = {}

    def entries(self, conn: sqlite3.Connection, me: str, queue: list[str]) -> tuple[str, int, int]:
        """(the JSON array of the entries of the queue's clips on the page, done, total)."""
        with self._lock:
            kept = self._lists.setdefault(me, _List())
        with kept.lock:
            clips = self.results.clips()
            top = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0]
            # seq is the rowid; '+layer' keeps SQLite on the range of the new rows
            changed = {r[0] for r in conn.execute(
                "SELECT DISTINCT clip_id FROM changes WHERE seq > ? AND seq <= ? AND +layer = ?", (kept.seq, top, me))}
            shown, stale = [], []
            entries = kept.entries
            for c in queue:
                clip = clips.get(c)
                if clip is None:
                    continue
                shown.append(c)
                persons = self.results.persons(c)
                old = entries.get(c)
                if old is None or c in changed or (old[0] is not clip and old[0] != clip) or old[1] != persons:
                    stale.append((c, clip, persons))
            if not stale and shown == kept.shown:
                kept.seq = top
                return kept.text, kept.done, len(shown)
            snap = Snapshot.read(conn, me) if len(stale) > BATCH else None
            for c, clip, persons in stale:
                labels = snap or Snapshot.read(conn, me, c)
                entry = clip_state(self.results, clip, labels.layer_actions(me), labels.layer_excluded(me))
                entries[c] = (clip, persons, json.dumps(entry, separators=(",", ":")), entry["done"])
            kept.shown = shown
            kept.text = "[" + ",".join([entries[c][2] for c in shown]) + "]"
            kept.done = sum(entries[c][3] for c in shown)
            kept.seq = top  # only now: a failure above leaves these clips to be made again
            return kept.text, kept.done, len(shown)
