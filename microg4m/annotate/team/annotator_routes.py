"""The annotator's page of team mode: the single-user page (annotate.js and index.html)
over the same JSON API (see app.py), limited to one's own labels and one's queue:
``GET /api/state`` (a page of the queue: pages.py), ``GET /api/clips/<clip>``, ``POST /api/actions``, ``POST
/api/screening``. An ``annotator`` parameter (query or body) may name the owner of the
labels; any name but one's own is refused.

Blind double annotation: an answer carries nothing about the co-annotators. A write
answers with ``change``, the number of the change among one's own (history.ordinal; null
when nothing changed), never with history seqs, which would count the rows written by
others (and the final labels their agreement brings) in between."""

from __future__ import annotations

import json

from flask import Flask, Response, g, jsonify, redirect, render_template, request

from microg4m.formats.labels import LABEL_TYPES, MAX_ACTIONS
from ..api import clip_boxes, clip_state, palette_rgb
from ..errors import Refused
from ..pages import todo_page
from ..store import check_reason
from ..suggestions import Suggestions, tally
from . import assign, decisions, history
from ..detection_suggestions import from_config
from .clip_lists import ClipLists
from .decisions import Snapshot, check_action, check_person


def install(app: Flask, project, ctx) -> None:
    res = project.results
    lists = ClipLists(res)  # each annotator's clip list, made again only where it changed
    app.extensions["microg4m.team.lists"] = lists
    lists.warm(ctx.conn())  # every annotator's list made once, before the server answers
    detected = from_config(res, project.settings.label_map, project.label_map,
                           **(project.settings.detections or {"detections": None}))
    suggestions = Suggestions(res, project.label_ids, enabled=project.settings.suggestions,
                              detections=detected)  # suggestions.py, detection_suggestions.py

    def my_state(clip, snap: Snapshot, me: str) -> dict:
        return clip_state(clip, res.persons(clip.clip_id), snap.layer_actions(me), snap.layer_excluded(me))

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
        # new clips of a re-run join the queue at a login or a write (GET only reads)
        listing, done = lists.entries(c, me, assign.queue(c, me))
        clips, where = todo_page(listing, request.args)  # one page of the queue (pages.py)
        total = len(listing.ids)
        head = json.dumps({
            "annotator": me, "role": "annotator", "actions_file": f"{me}'s labels (team database)",
            "screening_file": f"{total} clips in the queue", **where, "max_actions": MAX_ACTIONS,
            "label_types": list(LABEL_TYPES), "labels": ctx.labels, "colors": palette_rgb(),
            "problems": res.problems() + suggestions.problems(), "done": done, "total": total,
            "suggestions": tally(history.outcomes(c, me).values())},
            separators=(",", ":"))
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
        out["suggestions"] = suggestions.of_clip(c.clip_id, out["persons"])
        return jsonify(out)

    def settled(cn, c, persons: list[int], me: str, seqs: list[int]) -> tuple[int | None, list[int]]:
        """After an annotator's change (``seqs``): the clip's final labels brought in line.
        Returns the number of the change among the annotator's own (None: nothing changed)
        and every seq written (for ctx.write, which syncs the files when a final row changed)."""
        if not seqs:
            return None, seqs
        final = decisions.settle(cn, c, persons, assign.annotators_of(cn, c.clip_id))
        return history.ordinal(cn, me, seqs[-1]), seqs + final

    @app.post("/api/actions")
    @ctx.role("annotator")
    def change_action():
        data = ctx.body()
        me = ctx.owner(data.get("annotator"))
        ctx.assign_new()
        op = data.get("op")
        if op not in ("add", "remove", "set"):
            raise Refused(400, f"op must be 'add', 'remove' or 'set', got {op!r}")
        c = ctx.my_clip(data.get("clip_id"), me)
        persons = res.persons(c.clip_id)
        pid = check_person(persons, c.clip_id, data.get("person_id"))
        hint = suggestions.get(c.clip_id, pid)
        if op == "set":
            given = data.get("actions")
            if not isinstance(given, list):
                raise Refused(400, f"actions must be a list of action ids, got {given!r}")
            ids = list(dict.fromkeys(check_action(project.label_ids, a) for a in given))
        aid = check_action(project.label_ids, data.get("action")) if op == "add" else data.get("action")
        if op == "remove" and (isinstance(aid, bool) or not isinstance(aid, int)):
            raise Refused(400, f"action must be an integer id, got {aid!r}")
        def fn(cn):
            if op == "set":
                acts, seqs = decisions.set_actions(cn, me, c, pid, ids, hint)
            else:
                acts, seqs = decisions.change_action(cn, me, c, persons, pid, aid, op == "add", hint)
            change, seqs = settled(cn, c, persons, me, seqs)
            return (acts, change), seqs

        (acts, change), _ = ctx.write(fn)
        return jsonify(clip_id=c.clip_id, person_id=pid, actions=acts, change=change)

    @app.post("/api/screening")
    @ctx.role("annotator")
    def screening():
        data = ctx.body()
        me = ctx.owner(data.get("annotator"))
        ctx.assign_new()
        c = ctx.my_clip(data.get("clip_id"), me)
        excluded = data.get("excluded")
        if not isinstance(excluded, bool):
            raise Refused(400, f"excluded must be true or false, got {excluded!r}")
        reason = check_reason(data.get("reason", ""))
        persons = res.persons(c.clip_id)
        def fn(cn):
            return settled(cn, c, persons, me, decisions.change_exclusion(cn, me, c, excluded, reason))

        change, _ = ctx.write(fn)
        return jsonify(clip_id=c.clip_id, excluded=excluded, reason=reason if excluded else "", change=change)
