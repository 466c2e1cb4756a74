"""The team server (Flask): login, each annotator's page, the adjudication page.

Every request passes, in this order: the Host/Origin guard (guard.py: the same scheme,
host and port; the body size, the framing headers); the session (a random token in the
``__Host-`` cookie, Secure, HttpOnly, SameSite=Strict, looked up in the database); for a
state-changing request, the session's CSRF token in the ``X-CSRF-Token`` header (the
login form carries its own: paired with a login cookie, handed out and taken back
server-side, good once); then the role of the route. Refusals are JSON ``{"error": ...}``
with 401 (not logged in), 403 (CSRF, role, another annotator's labels, a clip outside
one's queue) or the 4xx of the bad value; nothing is written.

Logins are throttled per account and per client address (throttle.py, config
``team.login``): a locked one is refused (429) without checking the password; every
refused login is a line in the server's log (logger ``microg4m.team``), and a new lock a
warning there (``microg4m team user list`` shows the locks, ``user unlock`` lifts one).
A login also assigns the clips a re-run of the workflow brought (GETs never write).

The pages, by area: the annotator's page (annotator_routes.py), the adjudication page
(adjudication_routes.py), the captions and QA pairs (vqa_routes.py: the editors of
single-user mode, ``/adjudicate/captions``); the frames and videos are api.py's, for
annotators only within their queue. Every write answers after its transaction is
committed (synced): the adjudicator's with the history seqs it appended (``seq``), an
annotator's with the number of the change among their own (``change``; blind, see
annotator_routes.py).
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from flask import Flask, Response, g, jsonify, redirect, render_template, request

from ..api import install_errors, install_media, json_body
from ..errors import Refused
from ..guard import install as install_guard
from . import accounts, adjudication_routes, annotator_routes, assign, throttle, vqa_routes
from .db import FINAL, transaction
from .files import FilesError
from .project import Project

ANNOTATE = Path(__file__).resolve().parent.parent  # templates/ and static/ of the annotation page
COOKIE = "__Host-microg4m-team"
LOGIN_COOKIE = "__Host-microg4m-login"
CSRF_HEADER = "X-CSRF-Token"
PUBLIC = {"login", "login_post", "static", "favicon"}
log = logging.getLogger("microg4m.team")


def create_app(project: Project, hosts, session_hours: float | None = None) -> Flask:
    app = Flask(__name__, template_folder=str(ANNOTATE / "templates"), static_folder=str(ANNOTATE / "static"))
    app.json.sort_keys = False
    install_guard(app, hosts)  # Host/Origin, the body size limit, the framing headers
    res = project.results
    hours = session_hours or project.settings.session_hours
    labels = [{"id": int(r.id), "name": r.name, "label_type": r.label_type} for r in project.label_map.itertuples()]

    local = threading.local()
    opened: list[sqlite3.Connection] = []
    opened_lock = threading.Lock()

    def conn() -> sqlite3.Connection:
        """This thread's database connection, kept from request to request (one per server
        thread: opening one costs more than most requests do)."""
        c = getattr(local, "conn", None)
        if c is None:
            c = local.conn = project.connect()
            with opened_lock:
                opened.append(c)
        return c

    @app.teardown_appcontext
    def _end(_exc):
        c = getattr(local, "conn", None)
        if c is not None and c.in_transaction:  # never left open (transaction() ends its own)
            c.execute("ROLLBACK")

    def close_connections() -> None:
        """Close every thread's connection (after the server stopped: the last close merges the WAL)."""
        with opened_lock:
            for c in opened:
                c.close()
            opened.clear()

    app.extensions["microg4m.team.close"] = close_connections

    install_errors(app)

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

    def owner(asked) -> str:
        """The annotator whose labels are asked for: only one's own."""
        me = g.user["name"]
        if asked is not None and asked != me:
            raise Refused(403, f"refused: {me} can read and change only their own labels, not those of {asked!r}")
        return me

    def cookie(resp, name: str, value: str, max_age: int) -> None:
        resp.set_cookie(name, value, max_age=max_age, path="/", secure=True, httponly=True, samesite="Strict")

    def assign_new() -> None:
        """Assign the clips a re-run brought (at a login or a write); a file that cannot be
        written only delays it (logged), it does not fail the request."""
        try:
            project.assign_new(conn())
        except FilesError as exc:
            log.warning("new clips not assigned yet: %s", exc)

    # ------------------------------------------------------------ login
    forms = accounts.LoginForms()
    limits = project.login_limits

    @app.get("/login")
    def login(error: str = "", status: int = 200):
        token = forms.issue()
        resp = Response(render_template("team_login.html", csrf=token, error=error), status=status)
        cookie(resp, LOGIN_COOKIE, token, int(forms.max_age))
        return resp

    @app.post("/login")
    def login_post():
        form = request.form
        token = form.get("csrf")
        if not (accounts.same_token(token, request.cookies.get(LOGIN_COOKIE)) and forms.take(token)):
            return login("The login form expired or came from elsewhere; try again.", 403)
        name, addr = form.get("name", ""), request.remote_addr or "unknown"
        who = f"{name[:60]!r} from {addr}"
        valid = name if accounts.ANNOTATOR.fullmatch(name) else None
        attempt = throttle.begin(conn(), limits, valid, addr)
        if attempt.locked:
            key, until = attempt.locked
            when = time.strftime("%H:%M:%S UTC", time.gmtime(until))
            log.warning("login refused: %s: %s is locked until %s (too many failed logins)", who, key, when)
            resp = login(f"Too many failed logins; try again after {when}.", 429)
            resp.headers["Retry-After"] = str(max(1, int(until - time.time()) + 1))
            return resp
        user = accounts.verify(conn(), name, form.get("password", ""))
        if user is None:
            counts = ", ".join(f"{k} {n} of {limit}" for k, n, limit in attempt.counts)
            log.warning("login refused: %s: wrong name or password, or the account is disabled (%s)", who, counts)
            for key in attempt.armed:
                log.warning("LOCKED %s for %g s after too many failed logins (the last %s); "
                            "lift it with: microg4m team user unlock %s", key, limits.lock_seconds, who,
                            key.removeprefix("account:"))
            return login("Wrong name or password (or the account is disabled).", 401)
        throttle.succeeded(conn(), attempt)
        assign_new()  # the clips a re-run of the workflow brought
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

    # ------------------------------------------------------------ what the areas share
    def my_clip(clip_id, me: str):
        clip = res.clip(clip_id)
        if me not in assign.annotators_of(conn(), clip.clip_id):
            raise Refused(403, f"refused: clip {clip.clip_id} is not in {me}'s queue")
        return clip

    def write(fn, sync=None, kinds: tuple = ()):
        """Run ``fn(conn)`` in one transaction; if it changed a final row (of ``kinds``, when
        given), bring the files in step in the same transaction: ``sync(conn)``, by default
        the label files. A file that cannot be written rolls the change back (503)."""
        c = conn()
        try:
            with transaction(c):
                out, seqs = fn(c)
                of_kind = f" AND kind IN ({','.join('?' * len(kinds))})" if kinds else ""
                final = f"SELECT 1 FROM changes WHERE layer = ?{of_kind} AND seq IN ({','.join('?' * len(seqs))})"
                if seqs and c.execute(final, (FINAL, *kinds, *seqs)).fetchone():
                    (sync or project.files.sync)(c)
        except FilesError as exc:
            raise Refused(503, f"not saved (nothing was changed): {exc}") from None
        return out, seqs

    # ------------------------------------------------------------ frames (annotators: their queue only)
    def readable_clip(clip_id: str):
        if g.user["role"] == "annotator":
            return my_clip(clip_id, g.user["name"])
        return res.clip(clip_id)

    mb = project.settings.frame_cache_mb
    install_media(app, res, readable_clip, cache_control="private, no-cache",
                  frame_cache_bytes=None if mb is None else mb << 20)
    ctx = SimpleNamespace(conn=conn, role=role, body=json_body, owner=owner, my_clip=my_clip, write=write,
                          labels=labels, assign_new=assign_new)
    for area in (annotator_routes, adjudication_routes, vqa_routes):
        area.install(app, project, ctx)
    return app
