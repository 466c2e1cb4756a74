"""A team project: settings, the results folder, the label map, the database and the files.

What the server and the command line both do: assign clips, settle clips (their labels
and their texts), write the workflow's files, rebuild them from the history, and the
agreement reports.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from microg4m.formats.labels import read_label_map
from ..results import Results
from ..vqa_store import Drafts
from . import accounts, assign, history, report, text_agreement, throttle, vqa_review
from .db import FINAL, connect, transaction
from .decisions import Snapshot, settle
from .files import FilesError, FinalFiles, render
from .options import Settings
from .vqa_files import ReviewsFile


class Project:
    def __init__(self, settings: Settings, create: bool = True):
        self.settings = settings
        self.label_map = read_label_map(settings.label_map)
        self.label_ids = set(int(i) for i in self.label_map["id"])
        self.results = Results(settings.results)
        self.files = FinalFiles(settings.actions, settings.screening)
        # the captions and QA pairs: the reviews file the workflow reads, the model's drafts
        self.reviews = ReviewsFile(settings.vqa_reviews or Path(settings.actions).parent / "vqa_reviews.json")
        self.drafts = Drafts(self.results)
        self.db_path = Path(settings.database)
        self.password_rules = accounts.PasswordRules(**(settings.passwords or {})).check()
        self.login_limits = throttle.Limits(**(settings.login or {})).check()
        self._all_assigned = None  # (the clips, the accounts) when every kept clip had an annotator
        self._assigned: tuple = (None, None, {})  # (the clips on the page, the assignments' stamp, assigned())
        self._lock = threading.Lock()
        connect(self.db_path, create=create).close()  # creates the tables; a bad file fails here

    def connect(self) -> sqlite3.Connection:
        return connect(self.db_path, setup=False)

    # ------------------------------------------------------------ clips and assignments
    def assigned(self, conn: sqlite3.Connection) -> dict[str, list[str]]:
        """clip -> its active annotators, for the clips on the page (the same object while the
        clips, the assignments and the accounts are unchanged; do not change it)."""
        clips = self.results.clips()
        # assignments are only ever added (assign.assign inserts; nothing deletes one), so the
        # last rowid stands for them all: an index look-up, where COUNT(*) read the whole table
        stamp = (conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM assignments").fetchone()[0],
                 tuple(tuple(r) for r in conn.execute("SELECT name, active FROM users ORDER BY name")))
        with self._lock:
            if self._assigned[0] is clips and self._assigned[1] == stamp:
                return self._assigned[2]
        out = {c: a for c, a in assign.assignments(conn, active_only=True).items() if c in clips}
        with self._lock:
            self._assigned = (clips, stamp, out)
        return out

    def unassigned(self, conn: sqlite3.Connection) -> bool:
        """Whether a kept clip on the page has no active annotator (the new clips of a re-run,
        the clips of disabled annotators). Looked at again only when the clips on the page or
        the accounts changed since it last found none (assignments never move)."""
        clips = self.results.clips()
        users = [tuple(r) for r in conn.execute("SELECT name, active FROM users ORDER BY name")]
        if self._all_assigned is not None and self._all_assigned[0] is clips and self._all_assigned[1] == users:
            return False
        assigned = self.assigned(conn)
        if any(clip.kept and c not in assigned for c, clip in clips.items()):
            return True
        self._all_assigned = (clips, users)
        return False

    def assign(self, conn: sqlite3.Connection) -> dict[str, list[str]]:
        """Assign the kept clips that lack annotators, then settle the clips that changed."""
        kept = [c for c, clip in self.results.clips().items() if clip.kept]
        new = assign.assign(conn, kept, accounts.annotators(conn), self.settings.per_clip)
        if new:
            self.settle(conn, list(new))
        return new

    def assign_new(self, conn: sqlite3.Connection) -> dict[str, list[str]]:
        """Assign the kept clips a re-run of the workflow brought, if any (at a login and at
        an annotator's write; never on a GET, which only reads)."""
        return self.assign(conn) if self.unassigned(conn) else {}

    def settle(self, conn: sqlite3.Connection, clip_ids: list[str] | None = None) -> int:
        """Re-apply the agreement rule to clips (default: every assigned clip); writes the files."""
        assigned = self.assigned(conn)
        n = texts = 0
        with transaction(conn):  # the files in the same transaction: a file that cannot be written undoes it
            for c in sorted(assigned if clip_ids is None else set(clip_ids) & set(assigned)):
                clip = self.results.clip(c)
                n += len(settle(conn, clip, self.results.persons(c), assigned[c]))
                texts += len(vqa_review.settle(conn, clip, assigned[c]))
            if n:
                self.files.sync(conn)
            if texts:
                self.reviews.sync(conn)
        return n + texts

    def start(self, conn: sqlite3.Connection) -> dict:
        """What serve does first: take in existing labels, assign, settle, write the files.

        A file that cannot be written does not stop the start: ``files_error`` says why
        (the server then refuses every change of the final labels until it can)."""
        imported = self.files.import_once(conn, self.results, self.label_ids)
        imported_texts = self.reviews.import_once(conn, self.results)
        out = {"imported": imported, "imported_texts": imported_texts, "assigned": 0, "settled": 0, "written": [],
               "files_error": None}
        try:
            out["assigned"] = len(self.assign(conn))
            out["settled"] = self.settle(conn)
            out["written"] = [str(p) for p in self.files.sync(conn) + self.reviews.sync(conn)]
        except FilesError as exc:
            out["files_error"] = str(exc)
        return out

    def finish(self) -> dict:
        """What a clean stop does last: the files in step with the database, the WAL merged
        into the database file, the connection closed. ``files_error``: why the files could
        not be written (the database is complete either way)."""
        conn = self.connect()
        out = {"written": [], "files_error": None}
        try:
            try:
                out["written"] = [str(p) for p in self.files.sync(conn) + self.reviews.sync(conn)]
            except FilesError as exc:
                out["files_error"] = str(exc)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        return out

    # ------------------------------------------------------------ history and files
    def rebuild(self, conn: sqlite3.Connection, check: bool = False) -> dict:
        """Replay the history; write (or with ``check`` compare) the workflow's files.

        Values no file can take (text stored before the server checked it) are listed in
        ``unwritable``; without ``check`` they are first mended by ``@repair`` (history.repair)."""
        replayed = self._replay(conn)
        out = {"changes": conn.execute("SELECT COUNT(*) FROM changes").fetchone()[0], "differ": [],
               "unwritable": [f"{'/'.join(map(str, k))}: {why}" for k, why in history.unwritable(replayed).items()]}
        if not check and out["unwritable"]:
            out["repaired"] = len(history.repair(conn))
            replayed = self._replay(conn)
        snap = Snapshot.of({k: v for k, v in replayed.items() if k[0] == FINAL})
        finals = vqa_review.of({k: v for k, v in replayed.items() if k[0] == FINAL})
        expected = [*render(snap), self.reviews.expected(finals)]
        for path, text in zip([*self.files.paths(), self.reviews.path], expected):
            on_disk = path.read_bytes() if path.is_file() else None
            want = None if text is None else text.encode("utf-8", "surrogatepass")
            if on_disk != want:
                out["differ"].append(str(path))
        if not check:
            out["written"] = [str(p) for p in self.files.sync(conn, snap) + self.reviews.sync(conn, finals)]
            out["report"] = self.write_report(conn)
        return out

    def _replay(self, conn: sqlite3.Connection) -> dict:
        """Every latest value from the history, checked against the stored ones."""
        replayed = history.replay(conn)
        stored = history.current(conn)
        if replayed != stored:
            diff = sorted({repr(kv) for kv in replayed.items()} ^ {repr(kv) for kv in stored.items()})[:5]
            raise history.HistoryError(f"{self.db_path}: the current values are not what the history gives "
                                       f"(first differences: {diff})")
        return replayed

    # ------------------------------------------------------------ agreement
    def figures(self, conn: sqlite3.Connection) -> dict:
        return report.figures(Snapshot.read(conn), self.assigned(conn), self.results.persons,
                              accounts.annotators(conn), self.label_map, Path(self.settings.report_dir),
                              outcomes=history.outcomes(conn))

    def text_figures(self, conn: sqlite3.Connection) -> dict:
        return text_agreement.figures(vqa_review.read(conn), self.assigned(conn), self.drafts(),
                                      accounts.annotators(conn))

    def write_report(self, conn: sqlite3.Connection) -> list[str]:
        return (report.write(self.figures(conn), self.settings.report_dir)
                + text_agreement.write(self.text_figures(conn), self.settings.report_dir))
