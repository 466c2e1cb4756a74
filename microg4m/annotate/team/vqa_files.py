"""The reviews file the workflow reads (``vqa.reviews``), made from the final texts only.

Layout: the one single-user mode writes (vqa_store.py), read by ``microg4m.vqa.rules`` and the
``vqa_export`` rule, with one entry per clip that has a final text (vqa_review.py)::

    {"version": 1, "written_by": "microg4m team", "clips": {"<clip>": {"caption": "...",
      "qa_pairs": [{"Q": "...", "A": "..."}], "reviewed": true, "reviewer": "judy" | "@auto",
      "reviewers": ["alice", "bob"], "updated": "<UTC time>", "draft": {...} | null, "note": "..."}}}

So ``vqa_export`` exports exactly the final, reviewed clips: a version that is pending or
disagrees never reaches the file. Clips are sorted, so the same final texts give the same
bytes and ``microg4m team rebuild`` can compare them byte for byte. The file is written
atomically under its folder lock; a file that is not what team mode wrote last (written
by single-user mode, or by hand) is moved aside to ``NAME.<time>.bak`` first, and on the
first start its reviewed entries are taken into the history as final texts by ``@import``.
No file is created while there is no final text (so the workflow's ``rule all`` does not
ask for the VQA export before anything was reviewed).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from microg4m.vqa.rules import VQAError, check_entry, read_reviews_doc
from . import history
from .db import FINAL, IMPORT, get_meta, now, set_meta, transaction
from .files import writing, write_tracked
from .vqa_review import RESOLVED, TEXT, ClipTexts, file_entry, provenance, read

VERSION = 1
IMPORTED = "imported_text"


def render(texts: dict[str, ClipTexts]) -> str | None:
    """The file's text for the final texts (None when there is none)."""
    clips = {cid: file_entry(ct) for cid, ct in sorted(texts.items()) if ct.final}
    if not clips:
        return None
    return json.dumps({"version": VERSION, "written_by": "microg4m team", "clips": clips}, indent=2,
                      ensure_ascii=False) + "\n"


class ReviewsFile:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def import_once(self, conn: sqlite3.Connection, results) -> int:
        """On the first start with captions in team mode: the reviewed entries already in the
        file become final texts (``@import``). A broken file stops the start here."""
        if get_meta(conn, IMPORTED) is not None:
            return 0
        try:
            entries = read_reviews_doc(self.path)["clips"]
        except VQAError as exc:
            raise ValueError(str(exc)) from None
        clips = results.clips()
        n = 0
        with transaction(conn):
            if get_meta(conn, IMPORTED) is not None:  # another process was first
                return 0
            for cid, raw in sorted(entries.items()):
                try:
                    e = check_entry(raw)
                except VQAError as exc:
                    raise ValueError(f"{self.path}: clip {cid}: {exc}; fix it by hand") from None
                if not e["reviewed"]:
                    continue  # a person's unfinished text: kept in the .bak when the file is rewritten
                ctype = clips[cid].clip_type if cid in clips else ""
                value = {"caption": e["caption"], "qa_pairs": e["qa_pairs"], "by": IMPORT,
                         "reviewers": [e["reviewer"]] if e["reviewer"] else [],
                         "draft": provenance(e["draft"]) if isinstance(e["draft"], dict) else None,
                         "updated": e["updated"] if isinstance(e["updated"], str) else now()}
                n += bool(history.put(conn, IMPORT, FINAL, TEXT, cid, ctype, 0, value))
                history.put(conn, IMPORT, FINAL, RESOLVED, cid, ctype, 0, IMPORT)
            set_meta(conn, IMPORTED, str(n))
        return n

    def expected(self, texts: dict[str, ClipTexts]) -> str | None:
        """What the file must hold: the final texts; None (no file) while there is none."""
        text = render(texts)
        return render_empty() if text is None and self.path.is_file() else text

    def sync(self, conn: sqlite3.Connection, texts: dict[str, ClipTexts] | None = None) -> list[Path]:
        """Write the file from the final texts in the database (or ``texts``) if it differs
        (in the caller's write transaction, else its own; :class:`FilesError` when it cannot)."""
        with writing(conn, self.path):
            text = self.expected(texts if texts is not None else read(conn))
            if text is None:
                return []
            return [self.path] if write_tracked(conn, self.path, text) else []


def render_empty() -> str:
    """The file once every final text is gone (kept, so that the workflow's export empties too)."""
    return json.dumps({"version": VERSION, "written_by": "microg4m team", "clips": {}}, indent=2) + "\n"
