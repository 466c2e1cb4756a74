"""The caption and QA-pair editors' API (mounted on the annotation app by ``install``).

* ``GET  /api/vqa``: the rules (most pairs, the unanswerable answer, the warning
  patterns), the reviews file, and per clip whether a person saved or reviewed it and
  the status of its draft.
* ``GET  /api/vqa/<clip>``: the person's entry (or null), the draft (or null) and the
  warnings of the questions shown.
* ``POST /api/vqa``: ``{clip_id, caption, qa_pairs: [{Q, A}], reviewed, base, from_draft}``;
  refused (4xx, nothing written) when a rule is broken or ``base`` is not the entry's
  current ``updated`` time (someone saved in between). Returns the entry and warnings.
"""

from __future__ import annotations

from flask import Flask, jsonify

from microg4m.vqa.rules import MAX_PAIRS, UNANSWERABLE, WARNINGS, pair_warnings
from .api import json_body
from .results import Results
from .vqa_store import DRAFT_FIELDS, VQAStore


def install(app: Flask, res: Results, store: VQAStore) -> None:
    @app.get("/api/vqa")
    def vqa_summary():
        return jsonify(file=str(store.path), clips=store.summary(),
                       rules={"max_pairs": MAX_PAIRS, "unanswerable": UNANSWERABLE, "warnings": WARNINGS})

    @app.get("/api/vqa/<clip_id>")
    def vqa_clip(clip_id: str):
        res.clip(clip_id)
        entry = store.entries().get(clip_id)
        d = store.drafts().get(clip_id)
        draft = None
        if d:
            draft = {k: d.get(k) for k in ("status", "reason", "caption", "qa_pairs", *DRAFT_FIELDS)}
        shown = entry or draft or {}
        pairs = shown.get("qa_pairs") if isinstance(shown.get("qa_pairs"), list) else []
        ok_pairs = [p for p in pairs if isinstance(p, dict) and isinstance(p.get("Q"), str)]
        return jsonify(clip_id=clip_id, entry=entry, draft=draft, warnings=pair_warnings(ok_pairs))

    @app.post("/api/vqa")
    def vqa_save():
        data = json_body()
        entry = store.save(data.get("clip_id"), data.get("caption"), data.get("qa_pairs"), data.get("reviewed"),
                           base=data.get("base"), from_draft=data.get("from_draft") is True)
        return jsonify(clip_id=data["clip_id"], entry=entry, warnings=pair_warnings(entry["qa_pairs"]))
