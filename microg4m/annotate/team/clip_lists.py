"""The clip list of an annotator's ``/api/state``, kept between requests.

The page lists the clips of the annotator's queue (about a thousand each at the paper's
scale, ten thousand at ten times it), each with its persons and whether the annotator is
done with it, a page at a time (pages.py). Each clip's entry is kept as its JSON text, per
annotator, in a Listing, and a request does work only for what may have changed:

* nothing, when the results index's token (``view.token``: it changes whenever the clips,
  their decisions or any unit's tracks changed), the queue and the annotator's history
  rows are all as at the last answer: the kept list is paged again (one SQL query for
  the queue, one for the history rows since the last seq, a few stats for the index);
* the entries of the clips with new history rows in the annotator's layer (whoever wrote
  them: this server, another process, ``microg4m team rebuild``), changed in place;
* when the token changed: every queue clip's Clip and persons compared with those its
  entry was made from (dictionary lookups: the persons are kept per unit by the index),
  and only the entries that differ made again.

So a state costs the same at 4,759 and at 47,590 clips unless something changed. The
server makes every active annotator's list once when it starts, before it answers
(:meth:`ClipLists.warm`), so that neither does an annotator's first state.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass, field

from ..api import clip_state
from ..pages import Listing
from .decisions import Snapshot

BATCH = 20  # more clips to make again than this: read the annotator's labels at once


@dataclass
class _List:
    seq: int = 0  # the last history row taken into account
    token: int | None = None  # the index's token at the last answer
    queue: list[str] = field(default_factory=list)  # the queue at the last answer
    entries: dict[str, tuple] = field(default_factory=dict)  # clip -> (Clip, persons, entry JSON, done)
    listing: Listing = field(default_factory=Listing)  # the queue's clips of the last answer, in order
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ClipLists:
    def __init__(self, results):
        self.results = results
        self._lock = threading.Lock()
        self._lists: dict[str, _List] = {}

    def warm(self, conn: sqlite3.Connection) -> None:
        """Make every active annotator's list (at the server's start, before it answers: made
        beside the first requests, it held them up for seconds at 47,590 clips)."""
        from . import accounts, assign

        for name in accounts.annotators(conn):
            self.entries(conn, name, assign.queue(conn, name))

    def entries(self, conn: sqlite3.Connection, me: str, queue: list[str]) -> tuple[Listing, int]:
        """(the queue's clips that the results hold, as a Listing, how many are done)."""
        with self._lock:
            kept = self._lists.setdefault(me, _List())
        with kept.lock:
            view = self.results.view()
            top = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0]
            # seq is the rowid; '+layer' keeps SQLite on the range of the new rows
            changed = {r[0] for r in conn.execute(
                "SELECT DISTINCT clip_id FROM changes WHERE seq > ? AND seq <= ? AND +layer = ?", (kept.seq, top, me))}
            same = view.token == kept.token and queue == kept.queue
            if not changed and same:
                kept.seq = top
                return kept.listing, kept.done
            entries = kept.entries
            look = [c for c in queue if c in changed] if same else queue
            stale = []
            for c in look:
                clip = view.clips.get(c)
                if clip is None:
                    continue
                persons = view.persons(c)
                old = entries.get(c)
                if old is None or c in changed or (old[0] is not clip and old[0] != clip) or old[1] != persons:
                    stale.append((c, clip, persons))
            snap = Snapshot.read(conn, me) if len(stale) > BATCH else None
            for c, clip, persons in stale:
                labels = snap or Snapshot.read(conn, me, c)
                entry = clip_state(clip, persons, labels.layer_actions(me), labels.layer_excluded(me))
                entries[c] = (clip, persons, json.dumps(entry, separators=(",", ":")), entry["done"])
            if same:  # only labels changed: those entries in place
                for c, _, _ in stale:
                    i = kept.listing.where(c)
                    kept.done += entries[c][3] - kept.listing.flags[i]
                    kept.listing.set(i, entries[c][2], entries[c][3])
            else:
                shown = [c for c in queue if c in view.clips]
                kept.listing = Listing(shown, [entries[c][2] for c in shown], [entries[c][3] for c in shown])
                kept.done = sum(kept.listing.flags)
            # only now: a failure above leaves these clips to be made again
            kept.seq, kept.token, kept.queue = top, view.token, list(queue)
            return kept.listing, kept.done
