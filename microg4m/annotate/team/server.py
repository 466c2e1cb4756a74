"""The team server (Flask): login, each annotator's page, the adjudication page.

Every request passes, in this order: the Host/Origin guard (guard.py); the session (a
random token in the ``__Host-`` cookie, Secure, HttpOnly, SameSite=Strict, looked up in
the database); for a state-changing request, the session's CSRF token in the
``X-CSRF-Token`` header (the login form carries its own, paired with a login cookie);
then the role of the route. Refusals are JSON ``{"error": ...}`` with 401 (not logged
in), 403 (CSRF, role, another annotator's labels, a clip outside one's queue) or the
4xx of the bad value; nothing is written.

Annotators get the single-user page (annotate.js and index.html, unchanged) over the
same JSON API (see app.py), limited to their own labels and their queue: ``GET
/api/state``, ``GET /api/clips/<clip>``, ``POST /api/actions``, ``POST /api/screening``.
An ``annotator`` parameter (query or body) may name the owner of the labels; any name
but one's own is refused. Adjudicators get ``/adjudicate``: ``GET /api/adjudication``
(clips with status, agreement figures), ``GET /api/adjudication/<clip>``, ``GET
/api/history/<clip>``, ``POST /api/final`` (``{clip_id, excluded, reason, actions:
{person: [ids]}, note}``) and ``POST /api/report``. The captions and QA pairs (the
editors of single-user mode, ``/adjudicate/captions``) are in vqa_routes.py. Every write answers after its transaction is committed (synced), with
the history seqs it appended (``seq``).
"""

from __future__ import annotations

import functools
import secrets
import sqlite3
from pathlib import Path
from types import SimpleNamespace

from flask import Flask, Response, g, jsonify, redirect, render_template, request, send_file
from werkzeug.exceptions import HTTPException

from microg4m.formats.labels import MAX_ACTIONS
from microg4m.formats.labels import LABEL_TYPES
from ..app import _inside, palette_rgb
from ..errors import Refused
from ..frames import FrameCache
from ..guard import install as install_guard
from . import accounts, assign, decisions, history, report
from . import vqa_routes
from .db import FINAL, transaction
from .decisions import Snapshot, check_action, check_person, check_reason
from .project import Project

ANNOTATE = Path(__file__).resolve().parent.parent  # templates/ and static/ of the annotation page
COOKIE = "__Host-microg4m-team"
LOGIN_COOKIE = "__Host-microg4m-login"
CSRF_HEADER = "X-CSRF-Token"
PUBLIC = {"login", "login_post", "static", "favicon"}
MAX_NOTE = 1000


def create_app(project: Project, hosts, session_hours: float | None = None) -> Flask:
    app = Flask(__name__, template_folder=str(ANNOTATE / "templates"), static_folder=str(ANNOTATE / "static"))
    app.json.sort_keys = False
    app.config["MAX_CONTENT_LENGTH"] = 1 << 20
    install_guard(app, hosts)
    res = project.results
    cache = FrameCache()
    hours = session_hours or project.settings.session_hours
    lmap = project.label_map
    labels = [{"id": int(r.id), "name": r.name, "label_type": r.label_type} for r in lmap.itertuples()]

    def conn() -> sqlite3.Connection:
        if "conn" not in g:
            g.conn = project.connect()
        return g.conn

    @app.teardown_appcontext
    def _close(_exc):
        c = g.pop("conn", None)
        if c is not None:
            c.close()

    @app.errorhandler(Refused)
    def refused(exc: Refused):
        return jsonify(error=exc.message), exc.status

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if exc.code == 404:
            return jsonify(error=f"no such page or file: {request.path}"), 404
        return jsonify(error=f"{exc.code} {exc.name}: {exc.description}"), exc.code

    # ------------------------------------------------------------ sessions, CSRF, roles
    def wants_json() -> bool:
        return request.path.startswith(("/api/", "/clip/")) or request.method not in ("GET", "HEAD")

    @app.before_request
    def _session():
        g.user = accounts.session(conn(), request.cookies.get(COOKIE))
        if request.endpoint in PUBLIC:
            return None
        if g.user is None:
            if wants_json():
                return jsonify(error="not logged in (log in at /login)"), 401
            return redirect("/login")
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            sent = request.headers.get(CSRF_HEADER)
            if not sent:
                return jsonify(error=f"refused: missing CSRF token (the {CSRF_HEADER} header)"), 403
            if not accounts.same_token(sent, g.user["csrf"]):
                return jsonify(error="refused: the CSRF token does not match this session"), 403
        return None

    @app.after_request
    def _headers(resp):
        resp.headers.setdefault("X-Frame-Options", "DENY")  # no clicks on labels through another site's frame
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Referrer-Policy", "same-origin")
        return resp

    def role(name: str):
        def wrap(fn):
            @functools.wraps(fn)
            def inner(*a, **kw):
                if g.user["role"] != name:
                    raise Refused(403, f"refused: {request.path} is for {name}s; {g.user['name']} is an "
                                       f"{g.user['role']}")
                return fn(*a, **kw)
            return inner
        return wrap

    def body() -> dict:
        data = request.get_json(silent=True) if request.is_json else None
        if not isinstance(data, dict):
            raise Refused(400, "expected a JSON object body (Content-Type: application/json)")
        return data

    def owner(asked) -> str:
        """The annotator whose labels are asked for: only one's own."""
        me = g.user["name"]
        if asked is not None and asked != me:
            raise Refused(403, f"refused: {me} can read and change only their own labels, not those of {asked!r}")
        return me

    def cookie(resp, name: str, value: str, max_age: int) -> None:
        resp.set_cookie(name, value, max_age=max_age, path="/", secure=True, httponly=True, samesite="Strict")

    # ------------------------------------------------------------ login
    @app.get("/login")
    def login(error: str = "", status: int = 200):
        token = secrets.token_urlsafe(24)
        resp = Response(render_template("team_login.html", csrf=token, error=error), status=status)
        cookie(resp, LOGIN_COOKIE, token, 3600)
        return resp

    @app.post("/login")
    def login_post():
        form = request.form
        if not accounts.same_token(form.get("csrf"), request.cookies.get(LOGIN_COOKIE)):
            return login("The login form expired or came from elsewhere; try again.", 403)
        user = accounts.verify(conn(), form.get("name", ""), form.get("password", ""))
        if user is None:
            return login("Wrong name or password (or the account is disabled).", 401)
        resp = redirect("/adjudicate" if user["role"] == "adjudicator" else "/", code=303)
        cookie(resp, COOKIE, accounts.open_session(conn(), user["name"], hours), int(hours * 3600))
        resp.delete_cookie(LOGIN_COOKIE, path="/", secure=True, httponly=True, samesite="Strict")
        return resp

    @app.post("/logout")
    def logout():
        accounts.close_session(conn(), request.cookies.get(COOKIE))
        resp = jsonify(ok=True)
        resp.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="Strict")
        return resp

    @app.get("/favicon.ico")
    def favicon():
        return Response(status=204)

    # ------------------------------------------------------------ an annotator's page
    def my_clip(clip_id, me: str):
        clip = res.clip(clip_id)
        if me not in assign.annotators_of(conn(), clip.clip_id):
            raise Refused(403, f"refused: clip {clip.clip_id} is not in {me}'s queue")
        return clip

    def clip_state(clip, snap: Snapshot, me: str) -> dict:
        persons = res.persons(clip.clip_id)
        actions, excluded = snap.layer_actions(me), snap.layer_excluded(me)
        labelled = [p for p in persons if actions.get((clip.clip_id, p))]
        is_excluded = clip.clip_id in excluded
        return {
            "clip_id": clip.clip_id, "clip_type": clip.clip_type, "frames": clip.frames, "width": clip.width,
            "height": clip.height, "kept": clip.kept, "persons": persons, "labelled": len(labelled),
            "excluded": is_excluded, "reason": excluded.get(clip.clip_id, ""),
            "done": is_excluded or (bool(persons) and len(labelled) == len(persons)),
        }

    @app.get("/")
    def index():
        if g.user["role"] == "adjudicator":
            return redirect("/adjudicate")
        return render_template("team_annotate.html", annotator=g.user["name"], csrf=g.user["csrf"])

    @app.get("/api/state")
    @role("annotator")
    def state():
        me = owner(request.args.get("annotator"))
        c = conn()
        assigned = project.assigned(c)
        if any(clip.kept and clip_id not in assigned for clip_id, clip in res.clips().items()):
            project.assign(c)  # a re-run of the workflow brought new clips
        mine = assign.queue(c, me)
        snap = Snapshot.read(c, me)
        clips = [clip_state(res.clips()[cid], snap, me) for cid in mine if cid in res.clips()]
        return jsonify(
            annotator=me, role="annotator", actions_file=f"{me}'s labels (team database)",
            screening_file=f"{len(clips)} clips in the queue", max_actions=MAX_ACTIONS,
            label_types=list(LABEL_TYPES), labels=labels, colors=palette_rgb(), problems=res.problems(),
            clips=clips, done=sum(x["done"] for x in clips), total=len(clips))

    @app.get("/api/clips/<clip_id>")
    @role("annotator")
    def clip(clip_id: str):
        me = owner(request.args.get("annotator"))
        c = my_clip(clip_id, me)
        snap = Snapshot.read(conn(), me, c.clip_id)
        out = clip_state(c, snap, me)
        out["boxes"] = {str(f): [list(b) for b in bs] for f, bs in sorted(res.boxes(c.clip_id).items())}
        acts = snap.layer_actions(me)
        out["actions"] = {str(p): acts.get((c.clip_id, p), []) for p in out["persons"]}
        return jsonify(out)

    def write(fn):
        """Run ``fn(conn)`` in one transaction; write the files if it changed final labels."""
        c = conn()
        with transaction(c):
            out, seqs = fn(c)
        if seqs and c.execute(f"SELECT 1 FROM changes WHERE layer = ? AND seq IN ({','.join('?' * len(seqs))})",
                              (FINAL, *seqs)).fetchone():
            project.files.sync(c)
        return out, seqs

    def settled(cn, c, persons: list[int], seqs: list[int]) -> list[int]:
        """The seqs of an annotator's change, and of the final labels it brought in line."""
        return seqs + decisions.settle(cn, c, persons, assign.annotators_of(cn, c.clip_id)) if seqs else seqs

    @app.post("/api/actions")
    @role("annotator")
    def change_action():
        data = body()
        me = owner(data.get("annotator"))
        op = data.get("op")
        if op not in ("add", "remove"):
            raise Refused(400, f"op must be 'add' or 'remove', got {op!r}")
        c = my_clip(data.get("clip_id"), me)
        persons = res.persons(c.clip_id)
        pid = check_person(persons, c.clip_id, data.get("person_id"))
        aid = check_action(project.label_ids, data.get("action")) if op == "add" else data.get("action")
        if op == "remove" and (isinstance(aid, bool) or not isinstance(aid, int)):
            raise Refused(400, f"action must be an integer id, got {aid!r}")
        def fn(cn):
            acts, seqs = decisions.change_action(cn, me, c, persons, pid, aid, op == "add")
            return acts, settled(cn, c, persons, seqs)

        acts, seqs = write(fn)
        return jsonify(clip_id=c.clip_id, person_id=pid, actions=acts, seq=seqs)

    @app.post("/api/screening")
    @role("annotator")
    def screening():
        data = body()
        me = owner(data.get("annotator"))
        c = my_clip(data.get("clip_id"), me)
        excluded = data.get("excluded")
        if not isinstance(excluded, bool):
            raise Refused(400, f"excluded must be true or false, got {excluded!r}")
        reason = check_reason(data.get("reason", ""))
        persons = res.persons(c.clip_id)
        def fn(cn):
            seqs = decisions.change_exclusion(cn, me, c, excluded, reason)
            return None, settled(cn, c, persons, seqs)

        _, seqs = write(fn)
        return jsonify(clip_id=c.clip_id, excluded=excluded, reason=reason if excluded else "", seq=seqs)

    # ------------------------------------------------------------ frames (annotators: their queue only)
    def readable_clip(clip_id: str):
        if g.user["role"] == "annotator":
            return my_clip(clip_id, g.user["name"])
        return res.clip(clip_id)

    @app.get("/clip/<clip_id>/frame/<int:n>.jpg")
    def frame(clip_id: str, n: int):
        c = readable_clip(clip_id)
        resp = Response(cache.frame(_inside(c.path, res.root), n), mimetype="image/jpeg")
        resp.headers["Cache-Control"] = "private, no-cache"
        return resp

    @app.get("/clip/<clip_id>.mp4")
    def video(clip_id: str):
        path = _inside(readable_clip(clip_id).path, res.root)
        if not path.is_file():
            raise Refused(404, f"clip file {path.name} not found")
        return send_file(path, mimetype="video/mp4", conditional=True)

    # ------------------------------------------------------------ adjudication
    @app.get("/adjudicate")
    @role("adjudicator")
    def adjudicate():
        return render_template("team_adjudicate.html", user=g.user["name"], csrf=g.user["csrf"])

    def clip_summary(clip_id: str, snap: Snapshot, names: list[str]) -> dict:
        persons = res.persons(clip_id)
        return {"clip_id": clip_id, "status": decisions.status(snap, clip_id, persons, names), "annotators": names,
                "persons": len(persons), "final_by": snap.resolved.get(clip_id, "")}

    @app.get("/api/adjudication")
    @role("adjudicator")
    def adjudication():
        c = conn()
        snap = Snapshot.read(c)
        assigned = project.assigned(c)
        clips = [clip_summary(cid, snap, names) for cid, names in sorted(assigned.items())]
        counts = {s: sum(x["status"] == s for x in clips) for s in decisions.STATUSES}
        return jsonify(user=g.user["name"], labels=labels, label_types=list(LABEL_TYPES), colors=palette_rgb(),
                       max_actions=MAX_ACTIONS, clips=clips, counts=counts, problems=res.problems(),
                       figures=report.as_json(project.figures(c)), files=[str(p) for p in project.files.paths()])

    def detail(clip_id: str) -> dict:
        c = res.clip(clip_id)
        cn = conn()
        snap = Snapshot.read(cn, clip_id=c.clip_id)
        names = assign.annotators_of(cn, c.clip_id)
        persons = res.persons(c.clip_id)
        out = clip_summary(c.clip_id, snap, names)
        out.update(clip_type=c.clip_type, frames=c.frames, width=c.width, height=c.height, kept=c.kept,
                   persons=persons,
                   boxes={str(f): [list(b) for b in bs] for f, bs in sorted(res.boxes(c.clip_id).items())})
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
    @role("adjudicator")
    def adjudication_clip(clip_id: str):
        return jsonify(detail(clip_id))

    @app.post("/api/final")
    @role("adjudicator")
    def final():
        data = body()
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
            pid = check_person(persons, c.clip_id, int(key) if isinstance(key, str) and key.isdigit() else key)
            if not isinstance(ids, list):
                raise Refused(400, f"actions of person {pid} must be a list of ids, got {ids!r}")
            ids = list(dict.fromkeys(check_action(project.label_ids, a) for a in ids))
            if len(ids) > MAX_ACTIONS:
                raise Refused(409, f"person {pid} in {c.clip_id}: {len(ids)} actions (at most {MAX_ACTIONS})")
            actions[pid] = ids
        who = g.user["name"]
        _, seqs = write(lambda cn: (None, decisions.set_final(cn, who, c, reason if excluded else None, actions, note)))
        out = detail(c.clip_id)
        out["seq"] = seqs
        return jsonify(out)

    @app.post("/api/report")
    @role("adjudicator")
    def write_report():
        return jsonify(written=project.write_report(conn()))

    @app.get("/api/history/<clip_id>")
    @role("adjudicator")
    def clip_history(clip_id: str):
        c = res.clip(clip_id)
        return jsonify(clip_id=c.clip_id, rows=history.rows(conn(), clip_id=c.clip_id))

    vqa_routes.install(app, project, SimpleNamespace(conn=conn, role=role, body=body, owner=owner, my_clip=my_clip))
    return app
