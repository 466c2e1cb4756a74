"""The adjudication page of team mode (adjudicators only): ``/adjudicate``, ``GET
/api/adjudication`` (a page of the clips with their status, ``status=`` filtering them,
and the agreement figures; kept between requests and made again where something changed:
adjudication_lists.py; the pages: pages.py), ``GET
/api/adjudication/<clip>``, ``GET /api/history/<clip>``, ``POST /api/final`` (``{clip_id,
excluded, reason, actions: {person: [ids]}, note}``) and ``POST /api/report``."""

from __future__ import annotations

import re

from flask import Flask, g, jsonify, render_template, request

from microg4m.formats.labels import LABEL_TYPES, MAX_ACTIONS
from ..api import clip_boxes, json_with_clips, palette_rgb
from ..errors import Refused
from ..pages import status_page
from ..store import check_reason
from . import assign, decisions, history
from .adjudication_lists import ActionAdjudication
from .db import FINAL
from .decisions import Snapshot, check_action, check_person

MAX_NOTE = 1000


def install(app: Flask, project, ctx) -> None:
    res = project.results
    listed = ActionAdjudication(project)
    listed.get(ctx.conn())  # made once before the server answers (at 47,590 clips: seconds the first request held the others up)

    @app.get("/adjudicate")
    @ctx.role("adjudicator")
    def adjudicate():
        return render_template("team_adjudicate.html", user=g.user["name"], csrf=g.user["csrf"])

    def clip_summary(clip_id: str, snap: Snapshot, names: list[str]) -> dict:
        persons = res.persons(clip_id)
        return {"clip_id": clip_id, "status": decisions.status(snap, clip_id, persons, names), "annotators": names,
                "persons": len(persons), "final_by": snap.resolved.get(clip_id, "")}

    @app.get("/api/adjudication")
    @ctx.role("adjudicator")
    def adjudication():
        listing, counts, figures = listed.get(ctx.conn())  # made again only where something changed
        clips, where = status_page(listing, request.args)  # one page of it (pages.py)
        return json_with_clips(dict(
            user=g.user["name"], labels=ctx.labels, label_types=list(LABEL_TYPES), colors=palette_rgb(),
            max_actions=MAX_ACTIONS, counts=counts, problems=res.problems(), figures=figures,
            files=[str(p) for p in project.files.paths()], **where), clips)

    def detail(clip_id: str) -> dict:
        c = res.clip(clip_id)
        cn = ctx.conn()
        snap = Snapshot.read(cn, clip_id=c.clip_id)
        names = assign.annotators_of(cn, c.clip_id)
        persons = res.persons(c.clip_id)
        out = clip_summary(c.clip_id, snap, names)
        out.update(clip_type=c.clip_type, frames=c.frames, width=c.width, height=c.height, kept=c.kept,
                   persons=persons, boxes=clip_boxes(res, c.clip_id))
        out["labels"] = []
        for layer in names:
            acts = snap.layer_actions(layer, c.clip_id)
            excl = snap.layer_excluded(layer)
            out["labels"].append({
                "annotator": layer, "done": decisions.decision(snap, layer, c.clip_id, persons) is not None,
                "excluded": c.clip_id in excl, "reason": excl.get(c.clip_id, ""),
                "actions": {str(p): acts.get((c.clip_id, p), []) for p in persons}})
        fin = snap.layer_actions(FINAL, c.clip_id)
        fexcl = snap.layer_excluded(FINAL)
        out["final"] = {"excluded": c.clip_id in fexcl, "reason": fexcl.get(c.clip_id, ""),
                        "actions": {str(p): acts for (_, p), acts in sorted(fin.items())},
                        "note": snap.notes.get(c.clip_id, ""), "by": snap.resolved.get(c.clip_id, ""),
                        "set": c.clip_id in fexcl or bool(fin)}
        return out

    @app.get("/api/adjudication/<clip_id>")
    @ctx.role("adjudicator")
    def adjudication_clip(clip_id: str):
        return jsonify(detail(clip_id))

    @app.post("/api/final")
    @ctx.role("adjudicator")
    def final():
        data = ctx.body()
        c = res.clip(data.get("clip_id"))
        persons = res.persons(c.clip_id)
        excluded = data.get("excluded")
        if not isinstance(excluded, bool):
            raise Refused(400, f"excluded must be true or false, got {excluded!r}")
        reason = check_reason(data.get("reason", ""))
        note = check_reason(data.get("note", ""), "note", MAX_NOTE)
        given = data.get("actions", {})
        if not isinstance(given, dict):
            raise Refused(400, f"actions must be an object person -> [action ids], got {given!r}")
        actions: dict[int, list[int]] = {}
        for key, ids in given.items():
            pid = check_person(persons, c.clip_id, int(key) if re.fullmatch(r"[0-9]{1,9}", key) else key)
            if not isinstance(ids, list):
                raise Refused(400, f"actions of person {pid} must be a list of ids, got {ids!r}")
            ids = list(dict.fromkeys(check_action(project.label_ids, a) for a in ids))
            if len(ids) > MAX_ACTIONS:
                raise Refused(409, f"person {pid} in {c.clip_id}: {len(ids)} actions (at most {MAX_ACTIONS})")
            actions[pid] = ids
        who = g.user["name"]
        _, seqs = ctx.write(lambda cn: (None, decisions.set_final(cn, who, c, reason if excluded else None, actions,
                                                                  note)))
        out = detail(c.clip_id)
        out["seq"] = seqs
        return jsonify(out)

    @app.post("/api/report")
    @ctx.role("adjudicator")
    def write_report():
        return jsonify(written=project.write_report(ctx.conn()))

    @app.get("/api/history/<clip_id>")
    @ctx.role("adjudicator")
    def clip_history(clip_id: str):
        c = res.clip(clip_id)
        return jsonify(clip_id=c.clip_id, rows=history.rows(ctx.conn(), clip_id=c.clip_id))
