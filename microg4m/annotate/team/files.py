"""The two files the workflow reads, made from the final labels only.

* ``actions.csv`` (released schema): one row per final (clip, person, action), clips and
  persons in ascending order, each person's actions in the order they were set;
* the screening file: its header comment, then one ``clip_id  # reason`` line per
  finally excluded clip, in clip-id order.

The same final labels always give the same bytes, so a rebuild from the history can be
compared with the files byte for byte. Files are written atomically under the folder
lock of store.py, inside the database transaction that changed the final labels (the
write lock first, then the folder lock, always in that order): a file that cannot be
written (:class:`FilesError`) rolls the change back, so the database and the files stay
in step. A file that is not what team mode wrote last (edited by hand, written
by single-user mode, or there before team mode started) is first moved aside to
``NAME.<UTC time>.bak``; on the first start its content is taken into the history as
final labels by ``@import``.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from microg4m.common.atomic import write_text
from microg4m.formats.labels import ACTIONS_COLUMNS
from ..store import SCREENING_HEADER, Store, folder_lock
from . import history
from .db import FINAL, IMPORT, get_meta, set_meta, transaction
from .decisions import Snapshot


def render(snap: Snapshot) -> tuple[str, str]:
    """(actions CSV text, screening file text) of the final layer of a snapshot."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(ACTIONS_COLUMNS)
    for (clip, person), acts in sorted(snap.layer_actions(FINAL).items()):
        w.writerows([clip, snap.clip_type.get(clip, ""), person, a] for a in acts)
    lines = [SCREENING_HEADER]
    for clip, reason in sorted(snap.layer_excluded(FINAL).items()):
        lines.append(f"{clip}  # {reason}\n" if reason else f"{clip}\n")
    return buf.getvalue(), "".join(lines)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FilesError(ValueError):
    """A workflow file that cannot be written (the folder, the disk, or text that does not
    encode); the message names the file and the reason."""


@contextlib.contextmanager
def writing(conn: sqlite3.Connection, lock_path: Path):
    """The database's write transaction (the caller's, or a new one), then the folder lock
    of ``lock_path``: the one order in which team mode takes the two."""
    own = contextlib.nullcontext() if conn.in_transaction else transaction(conn)
    with own, folder_lock(lock_path):
        yield


class FinalFiles:
    def __init__(self, actions: str | os.PathLike, screening: str | os.PathLike):
        self.actions = Path(actions)
        self.screening = Path(screening)
        if self.actions.resolve() == self.screening.resolve():
            raise ValueError(f"the actions file and the screening file are the same file ({self.actions})")

    def paths(self) -> tuple[Path, Path]:
        return self.actions, self.screening

    def import_once(self, conn: sqlite3.Connection, results, label_ids: set[int]) -> int:
        """On the first start: take the labels already in the files into the history."""
        if get_meta(conn, "imported") is not None:
            return 0
        store = Store(results, self.actions, self.screening, label_ids)  # strict: a broken file stops here
        rows, excluded = store.read_rows(), store.excluded()
        clips = results.clips()
        n = 0
        with transaction(conn):
            if get_meta(conn, "imported") is not None:  # another process was first
                return 0
            persons: dict[tuple[str, int], list[int]] = {}
            types: dict[str, str] = {}
            for clip, ctype, pid, aid in rows:
                acts = persons.setdefault((clip, int(pid)), [])
                if int(aid) not in acts:
                    acts.append(int(aid))
                types.setdefault(clip, ctype)
            for (clip, pid), acts in persons.items():
                n += bool(history.put(conn, IMPORT, FINAL, "actions", clip, types[clip], pid, acts))
            for clip, reason in excluded.items():
                ctype = types.get(clip) or (clips[clip].clip_type if clip in clips else "")
                n += bool(history.put(conn, IMPORT, FINAL, "exclusion", clip, ctype, 0, reason))
                types.setdefault(clip, ctype)
            for clip, ctype in types.items():
                history.put(conn, IMPORT, FINAL, "resolved", clip, ctype, 0, IMPORT)
            set_meta(conn, "imported", str(n))
        return n

    def sync(self, conn: sqlite3.Connection, snap: Snapshot | None = None) -> list[Path]:
        """Write the files from the final labels in the database (or ``snap``) if they differ.

        Returns the files written; :class:`FilesError` when one cannot be written. Runs in
        the caller's write transaction (else its own), so writers take turns and the files
        hold the state of the latest one; a failure rolls the caller's change back.
        """
        written = []
        with writing(conn, self.actions):
            texts = render(snap if snap is not None else Snapshot.read(conn, FINAL))
            for path, text in zip(self.paths(), texts):
                if write_tracked(conn, path, text):
                    written.append(path)
        return written


def write_tracked(conn: sqlite3.Connection, path: Path, text: str) -> bool:
    """Write ``path`` atomically if it differs from ``text`` (the caller holds the write
    transaction and the folder lock); a file that is not what team mode wrote last is
    first moved aside to ``NAME.<UTC time>.bak``. Returns whether it wrote;
    :class:`FilesError` when it cannot."""
    assert conn.in_transaction
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FilesError(f"cannot write {path}: the database holds text that does not encode to UTF-8 "
                         f"({exc.object[exc.start:exc.end]!r}, written before microg4m checked it); "
                         f"run microg4m team rebuild to repair it") from None
    try:
        on_disk = path.read_bytes() if path.is_file() else None
        key = f"written:{path.resolve()}"
        if on_disk == data:
            return False
        if on_disk is not None and _digest(on_disk) != get_meta(conn, key):
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
            os.replace(path, path.with_name(f"{path.name}.{stamp}.bak"))
        write_text(path, text)
    except OSError as exc:
        raise FilesError(f"cannot write {path}: {exc.strerror or exc}") from None
    set_meta(conn, key, _digest(data))
    return True
