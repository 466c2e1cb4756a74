"""The annotator's page of team mode: the single-user page (annotate.js and index.html)
over the same JSON API (see app.py), limited to one's own labels and one's queue:
``GET /api/state``, ``GET /api/clips/<clip>``, ``POST /api/actions``, ``POST
/api/screening``. An ``annotator`` parameter (query or body) may name the owner of the
labels; any name but one's own is refused."""

from __future__ import annotations

import json

from flask import Flask, Response, g, jsonify, redirect, render_template, request

from microg4m.formats.labels import LABEL_TYPES, MAX_ACTIONS
from ..api import clip_boxes, clip_state, palette_rgb
from ..errors import Refused
from . import assign, decisions
from .clip_lists import ClipLists
from .decisions import Snapshot, check_action, check_person, check_reason


def install(app: Flask, project, ctx) -> None:
    res = project.results
    lists = ClipLists(res)  # each annotator's clip list, made again only where it changed

    def my_state(clip, snap: Snapshot, me: str) -> dict:
        return clip_state(res, clip, snap.layer_actions(me), snap.layer_excluded(me))

    @app.get("/")
    def index():
        if g.user["role"] == "adjudicator":
            return redirect("/adjudicate")
        return render_template("team_annotate.html", annotator=g.user["name"], csrf=g.user["csrf"])

    @app.get("/api/state")
    @ctx.role("annotator")
    def state():
        me = ctx.owner(request.args.get("annotator"))
        c = ctx.conn()
        if project.unassigned(c):
            project.assign(c)  # a re-run of the workflow brought new clips
        clips, done, total = lists.entries(c, me, assign.queue(c, me))
        head = json.dumps({
            "annotator": me, "role": "annotator", "actions_file": f"{me}'s labels (team database)",
            "screening_file": f"{total} clips in the queue", "max_actions": MAX_ACTIONS,
            "label_types": list(LABEL_TYPES), "labels": ctx.labels, "colors": palette_rgb(),
            "problems": res.problems(), "done": done, "total": total}, separators=(",", ":"))
        return Response(f'{head[:-1]},"clips":{clips}}}', mimetype="application/json")

    @app.get("/api/clips/<clip_id>")
    @ctx.role("annotator")
    def clip(clip_id: str):
        me = ctx.owner(request.args.get("annotator"))
        c = ctx.my_clip(clip_id, me)
        snap = Snapshot.read(ctx.conn(), me, c.clip_id)
        out = my_state(c, snap, me)
        out["boxes"] = clip_boxes(res, c.clip_id)
        acts = snap.layer_actions(me)
        out["actions"] = {str(p): acts.get((c.clip_id, p), []) for p in out["persons"]}
        return jsonify(out)

    def settled(cn, c, persons: list[int], seqs: list[int]) -> list[int]:
        """The seqs of an annotator's change, and of the final labels it brought in line."""
        return seqs + decisions.settle(cn, c, persons, assign.annotators_of(cn, c.clip_id)) if seqs else seqs

    @app.post("/api/actions")
    @ctx.role("annotator")
    def change_action():
        data = ctx.body()
        me = ctx.owner(data.get("annotator"))
        op = data.get("op")
        if op not in ("add", "remove"):
            raise Refused(400, f"op must be 'add' or 'remove', got {op!r}")
        c = ctx.my_clip(data.get("clip_id"), me)
        persons = res.persons(c.clip_id)
        pid = check_person(persons, c.clip_id, data.get("person_id"))
        aid = check_action(project.label_ids, data.get("action")) if op == "add" else data.get("action")
        if op == "remove" and (isinstance(aid, bool) or not isinstance(aid, int)):
            raise Refused(400, f"action must be an integer id, got {aid!r}")
        def fn(cn):
            acts, seqs = decisions.change_action(cn, me, c, persons, pid, aid, op == "add")
            return acts, settled(cn, c, persons, seqs)

        acts, seqs = ctx.write(fn)
        return jsonify(clip_id=c.clip_id, person_id=pid, actions=acts, seq=seqs)

    @app.post("/api/screening")
    @ctx.role("annotator")
    def screening():
        data = ctx.body()
        me = ctx.owner(data.get("annotator"))
        c = ctx.my_clip(data.get("clip_id"), me)
        excluded = data.get("excluded")
        if not isinstance(excluded, bool):
            raise Refused(400, f"excluded must be true or false, got {excluded!r}")
        reason = check_reason(data.get("reason", ""))
        persons = res.persons(c.clip_id)
        def fn(cn):
            seqs = decisions.change_exclusion(cn, me, c, excluded, reason)
            return None, settled(cn, c, persons, seqs)

        _, seqs = ctx.write(fn)
        return jsonify(clip_id=c.clip_id, excluded=excluded, reason=reason if excluded else "", seq=seqs)
