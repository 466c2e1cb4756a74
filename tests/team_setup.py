"""Helpers of the team-mode tests: a project over a small results folder, a served app,
and a login over real HTTP."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
import urllib.parse
from pathlib import Path

from test_annotate_store import LABEL_MAP, build_results

from microg4m.annotate.team import accounts
from microg4m.annotate.team.options import Settings
from microg4m.annotate.team.project import Project

REPO_DOCS = Path(__file__).resolve().parents[1] / "docs"
HEADER = "video_id,movie_or_real,person_id,action\n"
SCREENING_HEADER = "# Clips excluded by hand (one id per line; '# reason' after it). Read by the filter stage.\n"


def password(name: str) -> str:
    return f"secret-of-{name}"


def settings(tmp: Path, results: Path, k: int = 2, **more) -> Settings:
    """The project's settings; ``more``: other fields of Settings (label_map, login, ...)."""
    ann = tmp / "annotations"
    return Settings(**{**dict(results=str(results), database=str(ann / "team.sqlite"),
                              actions=str(ann / "actions.csv"), screening=str(ann / "screening_excluded.txt"),
                              label_map=str(LABEL_MAP), report_dir=str(ann / "team"), per_clip=k, session_hours=1.0),
                       **more})


def make_project(tmp: Path, results: Path | None = None, annotators=("alice", "bob"), adjudicators=("judy",),
                 k: int = 2, clip_maker=None, size=(320, 306), **more) -> Project:
    if results is None:
        results = build_results(tmp / "results", clip_maker=clip_maker, size=size)
    project = Project(settings(tmp, results, k, **more))
    conn = project.connect()
    for names, role in ((annotators, "annotator"), (adjudicators, "adjudicator")):
        for n in names:
            accounts.add_user(conn, n, role, password(n))
    project.start(conn)
    conn.close()
    return project


@contextlib.contextmanager
def serving(app, **settings):
    """The app on the production server (waitress, serving.py) in a thread, stopped cleanly;
    ``settings``: ServerSettings' (team.server)."""
    from microg4m.annotate.serving import Server, ServerSettings

    server = Server(app, "127.0.0.1", 0, ServerSettings(**settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield server.port
    finally:
        server.stop()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the server did not stop"


class Client:
    """Raw HTTP (http.client) with the session cookie and CSRF token of one login."""

    def __init__(self, port: int, host: str = "127.0.0.1"):
        self.port, self.host = port, host
        self.cookie = self.csrf = None

    def request(self, method: str, path: str, body=None, headers=None, form=None, raw: str | None = None):
        """``body`` as JSON, or ``form`` as a form, or ``raw`` as it is; (status, JSON or text, response)."""
        h = {"Host": f"127.0.0.1:{self.port}"}
        if self.cookie:
            h["Cookie"] = self.cookie
        data = raw
        if form is not None:
            data = urllib.parse.urlencode(form)
            h["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body)
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = raw.decode("utf-8", "replace")
        return resp.status, payload, resp

    def post(self, path: str, body, csrf: str | None | bool = True, **kw):
        headers = kw.pop("headers", {})
        token = self.csrf if csrf is True else csrf
        if token:
            headers["X-CSRF-Token"] = token
        return self.request("POST", path, body=body, headers=headers, **kw)

    def login(self, name: str, pw: str | None = None) -> "Client":
        status, page, resp = self.request("GET", "/login")
        login_cookie = resp.getheader("Set-Cookie").split(";", 1)[0]
        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        self.cookie = login_cookie
        status, _, resp = self.request("POST", "/login", form={"csrf": token, "name": name,
                                                               "password": pw or password(name)})
        assert status == 303, (name, status)
        self.cookie = next(c.split(";", 1)[0] for c in resp.headers.get_all("Set-Cookie")
                           if c.startswith("__Host-microg4m-team="))
        status, page, _ = self.request("GET", resp.getheader("Location"))
        assert status == 200, page
        self.csrf = re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)
        return self


def history_rows(project: Project) -> list[dict]:
    from microg4m.annotate.team.history import rows

    conn = project.connect()
    try:
        return rows(conn)
    finally:
        conn.close()


def post_oversized(port: int, path: str, headers: dict, size: int = 2 << 20) -> bytes:
    """POST a JSON body of ``size`` bytes (announced in Content-Length; only its first 64 KiB
    sent, as a server that refuses it answers at once) on a raw socket; the answer's status line."""
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
                                                  "Content-Length": str(size), **headers}.items())
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode() + b'{"pad": "' + b"x" * (64 << 10))
        raw = b""
        while b"\r\n" not in raw and (chunk := s.recv(4096)):
            raw += chunk
    return raw.split(b"\r\n", 1)[0]
