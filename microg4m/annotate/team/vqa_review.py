"""Captions and QA pairs in team mode: each reviewer's version, a clip's status, the final text.

The reviewers of a clip's caption and pairs are its annotators (assign.py: the same k,
the same rules, the same queue). Everything is stored in the history (history.py) as
clip-level keys (person 0), so every change has its who, when, before and after:

* ``text`` in a reviewer's layer: their version ``{caption, qa_pairs, reviewed, draft,
  updated}`` (``draft``: model, prompt hash and time of the draft it started from);
* ``text`` in ``@final``: the final text ``{caption, qa_pairs, by, reviewers, draft,
  updated}`` (``by``: ``@auto`` when the reviewers agreed, else the adjudicator);
* ``text_note`` and ``text_resolved`` in ``@final``: the adjudicator's note, and who
  adjudicated.

The status of a clip's text, like that of its labels (decisions.py):

* ``pending``: a reviewer has not marked their version reviewed;
* ``agreed``: every version is reviewed and they agree: the same caption after
  white-space normalisation and the same pairs (in any order). The final text is then
  set at once by ``@auto`` (the first reviewer's order of the pairs), and withdrawn by
  ``@auto`` when a reviewer changes their mind;
* ``disagree``: all reviewed, the versions differ: no final text until an adjudicator
  sets one;
* ``resolved``: an adjudicator set the final text; it stays, whatever the reviewers do.

The rules of single-user mode hold for every version and every final (microg4m.vqa.rules:
at most six pairs, at most one unanswerable pair answered exactly "Not mentioned").
Every function that writes runs in the caller's transaction and returns the seqs of the
history rows it appended.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from microg4m.vqa.rules import VQAError, check_entry, one_line
from ..errors import Refused
from ..store import check_reason
from . import history
from .db import AUTO, FINAL, now

TEXT, NOTE, RESOLVED = "text", "text_note", "text_resolved"
KINDS = (TEXT, NOTE, RESOLVED)
STATUSES = ("pending", "agreed", "disagree", "resolved")
DRAFT_FIELDS = ("model", "prompt_hash", "time")
MAX_NOTE = 1000


@dataclass
class ClipTexts:
    versions: dict[str, dict] = field(default_factory=dict)  # reviewer -> version
    final: dict | None = None
    note: str = ""
    resolved_by: str = ""


def of(values: dict) -> dict[str, ClipTexts]:
    """clip -> its texts, from latest values ``{(layer, kind, clip, person): Value}``."""
    out: dict[str, ClipTexts] = {}
    for (layer, kind, clip, _), v in sorted(values.items()):
        if kind not in KINDS:
            continue
        ct = out.setdefault(clip, ClipTexts())
        if kind == TEXT and layer == FINAL:
            ct.final = v.value
        elif kind == TEXT:
            ct.versions[layer] = v.value
        elif kind == NOTE and layer == FINAL:
            ct.note = v.value
        elif kind == RESOLVED and layer == FINAL:
            ct.resolved_by = v.value
    return out


def read(conn: sqlite3.Connection, clip_id: str | None = None) -> dict[str, ClipTexts]:
    sql = f"SELECT * FROM current WHERE kind IN ({','.join('?' * len(KINDS))})"
    args: list = list(KINDS)
    if clip_id is not None:
        sql, args = sql + " AND clip_id = ?", args + [clip_id]
    return of({(r["layer"], r["kind"], r["clip_id"], r["person_id"]): history.Value(json.loads(r["value"]), r["clip_type"])
               for r in conn.execute(sql, args)})


def read_clip(conn: sqlite3.Connection, clip_id: str) -> ClipTexts:
    return read(conn, clip_id).get(clip_id, ClipTexts())


# ---------------------------------------------------------------- comparing versions


def content(v: dict) -> tuple:
    """What two versions must share to agree: the caption (white space normalised) and the
    set of pairs."""
    return one_line(v["caption"]), tuple(sorted((one_line(p["Q"]), one_line(p["A"])) for p in v["qa_pairs"]))


def same(a: dict, b: dict) -> bool:
    return content(a) == content(b)


def status(ct: ClipTexts, reviewers: list[str]) -> str:
    if ct.resolved_by:
        return "resolved"
    versions = [ct.versions.get(r) for r in reviewers]
    if not versions or any(v is None or not v.get("reviewed") for v in versions):
        return "pending"
    return "agreed" if all(same(v, versions[0]) for v in versions) else "disagree"


# ---------------------------------------------------------------- checks


def check_text(clip_id: str, caption, qa_pairs, reviewed: bool = True) -> tuple[str, list[dict]]:
    """The caption and pairs under the rules of single-user mode; :class:`Refused` (422) else."""
    try:
        checked = check_entry({"caption": caption, "qa_pairs": qa_pairs, "reviewed": reviewed})
    except VQAError as exc:
        raise Refused(422, f"{clip_id}: {exc}") from None
    return checked["caption"], checked["qa_pairs"]


def check_note(note) -> str:
    return check_reason(note, "note", MAX_NOTE)


def provenance(draft: dict | None) -> dict | None:
    """The draft fields kept with a version (model, prompt hash, time), or None."""
    return {k: draft.get(k) for k in DRAFT_FIELDS} if draft else None


# ---------------------------------------------------------------- a reviewer's version


def _without_time(v: dict | None) -> dict | None:
    return None if v is None else {k: x for k, x in v.items() if k != "updated"}


def save_version(conn: sqlite3.Connection, who: str, clip, caption, qa_pairs, reviewed, base,
                 draft: dict | None) -> tuple[dict, list[int]]:
    """Store ``who``'s version of the clip's text; returns (version, seqs).

    ``base``: the ``updated`` time of the version the page started from (None: none); a
    different one in the database means another tab saved in between: refused (409).
    ``draft``: the draft's provenance when the text came from the draft, else None (the
    version keeps the provenance it had).
    """
    if not isinstance(reviewed, bool):
        raise Refused(400, f"reviewed must be true or false, got {reviewed!r}")
    if base is not None and not isinstance(base, str):
        raise Refused(400, f"base must be the version's updated time or null, got {base!r}")
    caption, pairs = check_text(clip.clip_id, caption, qa_pairs, reviewed)
    current = history.get(conn, who, TEXT, clip.clip_id)
    on_disk = current.get("updated") if current else None
    if on_disk != base:
        raise Refused(409, f"{clip.clip_id}: your version was saved at {on_disk} after this page loaded it "
                           f"(another tab?); reload the clip (your text is still in the editor)")
    new = {"caption": caption, "qa_pairs": pairs, "reviewed": reviewed,
           "draft": draft if draft is not None else (current or {}).get("draft"), "updated": now()}
    if _without_time(new) == _without_time(current):
        return current, []
    seq = history.put(conn, who, who, TEXT, clip.clip_id, clip.clip_type, 0, new)
    return new, [seq] if seq else []


# ---------------------------------------------------------------- the final text


def _put_final(conn: sqlite3.Connection, who: str, clip, caption: str | None, pairs: list[dict] | None,
               reviewers: list[str], draft: dict | None) -> list[int]:
    current = history.get(conn, FINAL, TEXT, clip.clip_id)
    new = None
    if caption is not None:
        new = {"caption": caption, "qa_pairs": pairs, "by": who, "reviewers": list(reviewers), "draft": draft,
               "updated": now()}
        if _without_time(new) == _without_time(current):
            return []
    seq = history.put(conn, who, FINAL, TEXT, clip.clip_id, clip.clip_type, 0, new)
    return [seq] if seq else []


def settle(conn: sqlite3.Connection, clip, reviewers: list[str]) -> list[int]:
    """Bring an unresolved clip's final text in line with its reviewers (``@auto``)."""
    ct = read_clip(conn, clip.clip_id)
    if ct.resolved_by:
        return []
    if status(ct, reviewers) == "agreed":
        first = ct.versions[reviewers[0]]
        return _put_final(conn, AUTO, clip, first["caption"], first["qa_pairs"], reviewers, first.get("draft"))
    return _put_final(conn, AUTO, clip, None, None, reviewers, None)


def set_final(conn: sqlite3.Connection, who: str, clip, caption, qa_pairs, note: str,
              reviewers: list[str]) -> list[int]:
    """An adjudicator's final text for the clip (picked, merged or edited), with a note."""
    caption, pairs = check_text(clip.clip_id, caption, qa_pairs, reviewed=False)
    if not caption:
        raise Refused(422, f"{clip.clip_id}: the final text needs a caption")
    ct = read_clip(conn, clip.clip_id)
    drafts = [v.get("draft") for r, v in sorted(ct.versions.items()) if r in reviewers and v.get("draft")]
    seqs = _put_final(conn, who, clip, caption, pairs, reviewers, drafts[0] if drafts else None)
    for kind, value in ((NOTE, note or None), (RESOLVED, who)):
        seq = history.put(conn, who, FINAL, kind, clip.clip_id, clip.clip_type, 0, value)
        seqs += [seq] if seq else []
    return seqs


def file_entry(ct: ClipTexts) -> dict:
    """The clip's entry in the reviews file (the layout single-user mode writes, plus who)."""
    f = ct.final
    entry = {"caption": f["caption"], "qa_pairs": f["qa_pairs"], "reviewed": True, "reviewer": f["by"],
             "reviewers": f["reviewers"], "updated": f["updated"], "draft": f["draft"]}
    if ct.note:
        entry["note"] = ct.note
    return entry
