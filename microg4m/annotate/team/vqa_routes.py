"""The caption and QA-pair routes of the team server (mounted by server.py).

Reviewers (the annotators of a clip) use single-user mode's editors (vqa.js) over the
same API, limited to their own version and their queue:

* ``GET  /api/vqa``: the rules, and per clip of the queue whether one's version exists,
  is reviewed, and the status of the draft;
* ``GET  /api/vqa/<clip>``: one's version (``entry``, or null), the draft, the warnings;
* ``POST /api/vqa``: ``{clip_id, caption, qa_pairs, reviewed, base, from_draft}``; refused
  (4xx, nothing written) when a rule is broken, the clip is not in one's queue or
  ``base`` is not the version's current ``updated`` time. Answers after the commit with
  ``change``, the number of the change among one's own, and nothing about the
  co-reviewers (no status: blind review).

Adjudicators get ``/adjudicate/captions``: ``GET /api/text-adjudication`` (clips with
their text status, the text agreement figures), ``GET /api/text-adjudication/<clip>``
(the draft, each reviewer's version with word-level diffs against the draft and against
each other version, the final text, the frames' size and boxes) and ``POST
/api/text-final`` (``{clip_id, caption, qa_pairs, note}``).
"""

from __future__ import annotations

from flask import Flask, g, jsonify, render_template, request

from microg4m.vqa.rules import MAX_PAIRS, UNANSWERABLE, WARNINGS, pair_warnings
from ..api import clip_boxes, json_with_clips, palette_rgb
from ..pages import status_page
from . import assign, history, text_agreement, vqa_review
from .adjudication_lists import TextAdjudication


def _draft_view(d: dict | None) -> dict | None:
    if not d:
        return None
    return {k: d.get(k) for k in ("status", "reason", "caption", "qa_pairs", *vqa_review.DRAFT_FIELDS)}


def _as_entry(version: dict | None, who: str) -> dict | None:
    """A version in the shape of single-user mode's entries (what vqa.js reads)."""
    if version is None:
        return None
    return {"caption": version["caption"], "qa_pairs": version["qa_pairs"], "reviewed": version["reviewed"],
            "reviewer": who, "updated": version["updated"], "draft": version.get("draft")}


def install(app: Flask, project, ctx) -> None:
    """``ctx``: the server's helpers (conn, role, body, owner, my_clip, write, labels)."""
    res = project.results
    listed = TextAdjudication(project)
    listed.get(ctx.conn())  # made once before the server answers, as the label adjudication list
    rules = {"max_pairs": MAX_PAIRS, "unanswerable": UNANSWERABLE, "warnings": WARNINGS}
    final_kinds = vqa_review.KINDS

    def write(fn):
        """``fn`` in one transaction; the reviews file rewritten if a final text changed."""
        return ctx.write(fn, sync=project.reviews.sync, kinds=final_kinds)

    # ------------------------------------------------------------ a reviewer's version
    @app.get("/api/vqa")
    @ctx.role("annotator")
    def vqa_summary():
        me = ctx.owner(request.args.get("annotator"))
        c = ctx.conn()
        texts, drafts, clips = vqa_review.read(c), project.drafts(), res.clips()
        out = {}
        for cid in assign.queue(c, me):
            v = texts.get(cid, vqa_review.ClipTexts()).versions.get(me)
            d = drafts.get(cid)
            if cid in clips and (v is not None or d is not None):
                out[cid] = {"edited": v is not None, "reviewed": bool(v and v["reviewed"]),
                            "draft": d.get("status") if d else None}
        return jsonify(file=f"the team database ({me}'s version); final texts go to {project.reviews.path}",
                       clips=out, rules=rules)

    @app.get("/api/vqa/<clip_id>")
    @ctx.role("annotator")
    def vqa_clip(clip_id: str):
        me = ctx.owner(request.args.get("annotator"))
        c = ctx.my_clip(clip_id, me)
        entry = _as_entry(vqa_review.read_clip(ctx.conn(), c.clip_id).versions.get(me), me)
        draft = _draft_view(project.drafts().get(c.clip_id))
        shown = entry or draft or {}
        pairs = shown.get("qa_pairs") if isinstance(shown.get("qa_pairs"), list) else []
        ok = [p for p in pairs if isinstance(p, dict) and isinstance(p.get("Q"), str)]
        return jsonify(clip_id=c.clip_id, entry=entry, draft=draft, warnings=pair_warnings(ok))

    @app.post("/api/vqa")
    @ctx.role("annotator")
    def vqa_save():
        data = ctx.body()
        me = ctx.owner(data.get("annotator"))
        ctx.assign_new()
        c = ctx.my_clip(data.get("clip_id"), me)
        draft = vqa_review.provenance(project.drafts().get(c.clip_id)) if data.get("from_draft") is True else None

        def fn(cn):
            version, seqs = vqa_review.save_version(cn, me, c, data.get("caption"), data.get("qa_pairs"),
                                                    data.get("reviewed"), data.get("base"), draft)
            change = history.ordinal(cn, me, seqs[-1]) if seqs else None
            if seqs:
                seqs += vqa_review.settle(cn, c, assign.annotators_of(cn, c.clip_id))
            return (version, change), seqs

        (version, change), _ = write(fn)
        # blind: nothing about the co-reviewers (no status, no seqs; see annotator_routes.py)
        return jsonify(clip_id=c.clip_id, entry=_as_entry(version, me), warnings=pair_warnings(version["qa_pairs"]),
                       change=change)

    # ------------------------------------------------------------ adjudication
    @app.get("/adjudicate/captions")
    @ctx.role("adjudicator")
    def adjudicate_texts():
        return render_template("team_adjudicate_text.html", user=g.user["name"], csrf=g.user["csrf"])

    def clip_summary(cid: str, ct: vqa_review.ClipTexts, names: list[str]) -> dict:
        return {"clip_id": cid, "status": vqa_review.status(ct, names), "reviewers": names,
                "final_by": ct.final["by"] if ct.final else ""}

    @app.get("/api/text-adjudication")
    @ctx.role("adjudicator")
    def text_adjudication():
        listing, counts, figures = listed.get(ctx.conn())  # made again only where something changed
        clips, where = status_page(listing, request.args)  # one page of it (pages.py)
        return json_with_clips(dict(user=g.user["name"], counts=counts, rules=rules, file=str(project.reviews.path),
                                    colors=palette_rgb(), figures=figures, **where), clips)

    def detail(clip_id: str) -> dict:
        c = res.clip(clip_id)
        cn = ctx.conn()
        names = assign.annotators_of(cn, c.clip_id)
        ct = vqa_review.read_clip(cn, c.clip_id)
        d = project.drafts().get(c.clip_id)
        base = {"caption": (d or {}).get("caption") or "", "qa_pairs": (d or {}).get("qa_pairs") or []}
        versions = []
        for r in names:
            v = ct.versions.get(r)
            if v is None:
                versions.append({"reviewer": r, "present": False, "reviewed": False})
                continue
            diffs = {"draft": text_agreement.text_diff(base, v)}
            for other in names:
                if other != r and other in ct.versions:
                    diffs[other] = text_agreement.text_diff(ct.versions[other], v)
            versions.append({"reviewer": r, "present": True, "reviewed": v["reviewed"], "caption": v["caption"],
                             "qa_pairs": v["qa_pairs"], "updated": v["updated"], "diffs": diffs,
                             "warnings": pair_warnings(v["qa_pairs"])})
        out = clip_summary(c.clip_id, ct, names)
        out.update(frames=c.frames, width=c.width, height=c.height, kept=c.kept, persons=res.persons(c.clip_id),
                   boxes=clip_boxes(res, c.clip_id),
                   draft=_draft_view(d), versions=versions,
                   final={"set": ct.final is not None, "caption": ct.final["caption"] if ct.final else "",
                          "qa_pairs": ct.final["qa_pairs"] if ct.final else [],
                          "by": ct.final["by"] if ct.final else "", "note": ct.note,
                          "resolved_by": ct.resolved_by})
        return out

    @app.get("/api/text-adjudication/<clip_id>")
    @ctx.role("adjudicator")
    def text_adjudication_clip(clip_id: str):
        return jsonify(detail(clip_id))

    @app.post("/api/text-final")
    @ctx.role("adjudicator")
    def text_final():
        data = ctx.body()
        c = res.clip(data.get("clip_id"))
        note = vqa_review.check_note(data.get("note", ""))
        who = g.user["name"]
        _, seqs = write(lambda cn: (None, vqa_review.set_final(cn, who, c, data.get("caption"), data.get("qa_pairs"),
                                                               note, assign.annotators_of(cn, c.clip_id))))
        out = detail(c.clip_id)
        out["seq"] = seqs
        return jsonify(out)
