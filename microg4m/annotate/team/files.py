"""The two files the workflow reads, made from the final labels only.

* ``actions.csv`` (released schema): one row per final (clip, person, action), clips and
  persons in ascending order, each person's actions in the order they were set;
* the screening file: its header comment, then one ``clip_id  # reason`` line per
  finally excluded clip, in clip-id order.

The same final labels always give the same bytes, so a rebuild from the history can be
compared with the files byte for byte. Files are written atomically under the folder
lock of store.py. A file that is not what team mode wrote last (edited by hand, written
by single-user mode, or there before team mode started) is first moved aside to
``NAME.<UTC time>.bak``; on the first start its content is taken into the history as
final labels by ``@import``.
"""

from __future__ import annotations

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

        Returns the files written. Under the folder lock the latest committed state is read,
        so concurrent callers leave the files at the latest state.
        """
        written = []
        with folder_lock(self.actions):
            texts = render(snap if snap is not None else Snapshot.read(conn, FINAL))
            for path, text in zip(self.paths(), texts):
                if write_tracked(conn, path, text):
                    written.append(path)
        return written


def write_tracked(conn: sqlite3.Connection, path: Path, text: str) -> bool:
    """Write ``path`` atomically if it differs from ``text`` (the caller holds its folder
    lock); a file that is not what team mode wrote last is first moved aside to
    ``NAME.<UTC time>.bak``. Returns whether it wrote."""
    data = text.encode("utf-8")
    on_disk = path.read_bytes() if path.is_file() else None
    key = f"written:{path.resolve()}"
    if on_disk == data:
        return False
    if on_disk is not None and _digest(on_disk) != get_meta(conn, key):
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        os.replace(path, path.with_name(f"{path.name}.{stamp}.bak"))
    write_text(path, text)
    with transaction(conn):
        set_meta(conn, key, _digest(data))
    return True
