"""The clients of bench_annotate.py: annotators and an adjudicator driving the team pages
over real HTTP, as the pages' scripts do (not part of the pipeline).

How a client logs in is in :func:`add_account` and :func:`login` only, the same for main
before issue 33 (f750555) and after issue 34: accounts made with ``microg4m team user add
--password-stdin`` (a 33-character random password per account, which issue 34's rules
take: 12 characters, zxcvbn strength 3); a login form with a CSRF token and a login
cookie, a session cookie, the session's CSRF token in the page's ``<meta
name="csrf-token">``, sent as ``X-CSRF-Token`` on every post. Each user logs in once; its
frame connections share the session. When logins change, adapt those two functions.

A connection is opened when its first request is sent (the server closes one whose
request head is late: ``team.server.header_timeout``); a keep-alive connection the
server closed while it was idle (``channel_timeout``) is opened again once, as browsers do.

Every acknowledged write (a 200 answer to a post) is kept as an :class:`Ack` with what the
server answered of its history row (the adjudicator's writes: the seqs; an annotator's:
``change``, the number of the row among the annotator's own, as issue 34's blind answers
say it), for the check that each is in the history.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

KINDS = ("login", "state", "clip", "frame", "frames", "label", "exclude", "caption_open", "caption",
         "adjudication", "adjudication_clip", "final", "text_adjudication")


def kind_of(method: str, path: str) -> str:
    """The request kind of a request (the rows of the bench's table)."""
    if path.startswith("/clip/"):
        if path.endswith("/frames"):
            return "frames"  # every frame of the clip in one answer (the pages after issue 33)
        return "frame" if "/frame/" in path else "video"
    if path == "/login":
        return "login"
    exact = {("GET", "/api/state"): "state", ("POST", "/api/actions"): "label", ("POST", "/api/screening"): "exclude",
             ("POST", "/api/vqa"): "caption", ("GET", "/api/adjudication"): "adjudication",
             ("POST", "/api/final"): "final", ("GET", "/api/text-adjudication"): "text_adjudication",
             ("GET", "/api/vqa"): "caption_list"}
    if (method, path) in exact:
        return exact[(method, path)]
    for prefix, kind in (("/api/clips/", "clip"), ("/api/vqa/", "caption_open"),
                         ("/api/adjudication/", "adjudication_clip"), ("/api/history/", "history")):
        if path.startswith(prefix):
            return kind
    return "page"


# ---------------------------------------------------------------- authentication (adapt here)


def password(name: str) -> str:
    """A long password of one account (the same for every run)."""
    return "Bench-" + hashlib.sha256(f"bench-annotate {name}".encode()).hexdigest()[:24] + "-pw!"


def add_account(python: str, env: dict, cwd: str, config: str, name: str, role: str) -> None:
    """Make the account with the command line of the code under test."""
    proc = subprocess.run([python, "-m", "microg4m.cli", "team", "user", "add", name, "--role", role,
                           "--password-stdin", "--configfile", config], input=password(name) + "\n",
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"team user add {name}: {proc.stderr.strip()}")


def login(http: "Http", name: str) -> None:
    """Log ``http`` in as ``name`` (today's login: see the module's docstring)."""
    status, page, headers = http.request("GET", "/login", record=False)
    token = re.search(r'name="csrf" value="([^"]+)"', page.decode()).group(1)
    http.cookie = _cookie(headers, "__Host-microg4m-login")
    status, _, headers = http.request("POST", "/login", form={"csrf": token, "name": name, "password": password(name)})
    if status != 303:
        raise RuntimeError(f"login of {name}: HTTP {status}")
    http.cookie = _cookie(headers, "__Host-microg4m-team")
    status, page, _ = http.request("GET", dict(headers)["location"], record=False)
    http.csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.decode()).group(1)


def _cookie(headers: list[tuple[str, str]], name: str) -> str:
    for key, value in headers:
        if key == "set-cookie" and value.startswith(name + "="):
            return value.split(";", 1)[0]
    raise RuntimeError(f"no {name} cookie in the answer")


# ---------------------------------------------------------------- transport and records


class Recorder:
    """Latency (seconds) and status of every request, by kind; thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self.rows: list[tuple[str, float, int]] = []  # (kind, seconds, status; 0 = no answer)

    def add(self, kind: str, seconds: float, status: int) -> None:
        with self._lock:
            self.rows.append((kind, seconds, status))


class Http:
    """One keep-alive connection of one user: its cookie and CSRF token."""

    def __init__(self, port: int, rec: Recorder, timeout: float):
        self.port, self.rec, self.timeout = port, rec, timeout
        self.conn: http.client.HTTPConnection | None = None
        self.cookie = self.csrf = ""

    def request(self, method: str, path: str, body=None, form=None, record: bool = True):
        """(status, body bytes, headers); status 0 when the server did not answer."""
        headers = {"Host": f"127.0.0.1:{self.port}"}
        if self.cookie:
            headers["Cookie"] = self.cookie
        data = None
        if form is not None:
            data, headers["Content-Type"] = urllib.parse.urlencode(form), "application/x-www-form-urlencoded"
        elif body is not None:
            data, headers["Content-Type"] = json.dumps(body), "application/json"
        if method != "GET" and self.csrf:
            headers["X-CSRF-Token"] = self.csrf
        t0 = time.perf_counter()
        for again in (False, True):
            reused = self.conn is not None
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                status, out_headers = resp.status, [(k.lower(), v) for k, v in resp.getheaders()]
                if resp.will_close:
                    self.close()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # the server closed a keep-alive connection while it was idle (channel_timeout):
                # once more on a new connection, as browsers do
                self.close()
                if reused and not again:
                    continue
                status, raw, out_headers = 0, b"", []
            except (OSError, http.client.HTTPException):
                self.close()
                status, raw, out_headers = 0, b"", []
                break
        if record:
            self.rec.add(kind_of(method, path.split("?", 1)[0]), time.perf_counter() - t0, status)
        return status, raw, out_headers

    def json(self, method: str, path: str, body=None):
        status, raw, _ = self.request(method, path, body=body)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass
class Ack:
    """A write the server acknowledged (200), with the history rows it said it appended."""

    who: str
    layer: str
    kind: str  # actions, exclusion, text, final
    clip: str
    person: int
    value: object
    seqs: list[int] = field(default_factory=list)  # the adjudicator's writes: the history seqs answered
    change: int | None = None  # an annotator's since issue 34 (blind): the number of its row in its layer


class Acks:
    def __init__(self):
        self._lock = threading.Lock()
        self.items: list[Ack] = []

    def add(self, ack: Ack) -> None:
        with self._lock:
            self.items.append(ack)


# ---------------------------------------------------------------- the sessions


@dataclass
class Plan:
    """What each annotator does: ``actions`` requests (not counting frames), pauses of
    ``think`` seconds on average between them, the frames of each opened clip fetched as
    the code's pages fetch them: in one request (``frames_in_one``: GET
    /clip/<clip>/frames), else one request per frame over ``frame_connections``
    connections at once (as a browser does)."""

    actions: int
    think: float
    frame_connections: int
    label_ids: list[int]
    frames_in_one: bool = True
    seed: int = 7
    exclude_share: float = 0.05
    caption_share: float = 0.26  # MicroG-4M: 1,238 captions for 4,759 clips
    second_action_share: float = 0.15
    disagree_share: float = 0.2
    state_every: int = 10  # clips between two reloads of the page (GET /api/state)


def _choice(plan: Plan, *key) -> int:
    h = int(hashlib.sha256(repr(key).encode()).hexdigest()[:12], 16)
    return plan.label_ids[h % len(plan.label_ids)]


class User:
    """One person at a page: the API connection, the frame connections (the same login), a
    seeded random generator, the requests made (``done``) and the errors answered."""

    def __init__(self, name: str, port: int, plan: Plan, rec: Recorder, acks: Acks, stop: threading.Event,
                 timeout: float):
        self.name, self.plan, self.rec, self.acks, self.stop = name, plan, rec, acks, stop
        self.api = Http(port, rec, timeout)
        self.frames = [Http(port, rec, timeout) for _ in range(plan.frame_connections)]
        self.rng = random.Random(f"{plan.seed} {name}")
        self.done = 0
        self.errors: list[str] = []

    def think(self, times: float = 1) -> bool:
        """Pause about ``times`` thinking times; False once the session is over."""
        return not self.stop.wait(self.rng.uniform(0.5, 1.5) * self.plan.think * times)

    def call(self, method: str, path: str, body=None):
        """One API request; its JSON answer, or None (the error kept) unless 200."""
        self.done += 1
        status, out = self.api.json(method, path, body)
        if status != 200:
            self.errors.append(f"{method} {path}: {status} {out}")
            return None
        return out

    def show(self, pool: ThreadPoolExecutor, clip_id: str, frames: int) -> None:
        """Every frame of the clip, as the pages ask: in one request, or at once over the
        frame connections."""
        for c in self.frames:
            c.cookie = self.api.cookie
        if self.plan.frames_in_one:
            self.frames[0].request("GET", f"/clip/{clip_id}/frames")
        else:
            _spread(pool, self.frames, clip_id, frames)


class Annotator(User):
    def more(self) -> bool:
        return self.done < self.plan.actions and not self.stop.is_set()

    def open_clip(self, clip_id: str, pool: ThreadPoolExecutor):
        clip = self.call("GET", f"/api/clips/{clip_id}")
        if clip is not None:
            self.show(pool, clip_id, int(clip["frames"]))
        return clip

    def run(self) -> None:
        login(self.api, self.name)
        with ThreadPoolExecutor(len(self.frames)) as pool:
            opened = 0
            for clip_id in self.queue():
                if not self.more():
                    break
                self.think()
                clip = self.open_clip(clip_id, pool)
                opened += 1
                if clip is None:
                    continue
                if self.rng.random() < self.plan.exclude_share:
                    self.think()
                    reason = "bench: camera shakes"
                    out = self.call("POST", "/api/screening", {"clip_id": clip_id, "excluded": True, "reason": reason})
                    if out is not None:
                        self.acks.add(Ack(self.name, self.name, "exclusion", clip_id, 0, reason, out.get("seq", []),
                                          out.get("change")))
                else:
                    for p in clip["persons"]:
                        if not self.more():
                            break
                        self.label(clip_id, p)
                if self.more() and self.rng.random() < self.plan.caption_share:
                    self.caption(clip_id)
                if self.more() and opened % self.plan.state_every == 0:
                    self.think()
                    self.call("GET", f"/api/state?todo=1&around={clip_id}")  # the page reloaded

    def queue(self):
        """The clips not done, a page at a time as the page shows them (``todo=1``: pages.py);
        the next page asked for once this one is labelled."""
        seen: set[str] = set()
        while self.more():
            state = self.call("GET", "/api/state?todo=1")
            fresh = [c["clip_id"] for c in (state or {}).get("clips", []) if not c["done"] and c["clip_id"] not in seen]
            if not fresh:
                return
            seen.update(fresh)
            yield from fresh

    def label(self, clip_id: str, person: int) -> None:
        agree = self.rng.random() >= self.plan.disagree_share
        actions = [_choice(self.plan, clip_id, person) if agree else _choice(self.plan, clip_id, person, self.name)]
        if self.rng.random() < self.plan.second_action_share:
            actions.append(_choice(self.plan, clip_id, person, "second"))
        for aid in dict.fromkeys(actions):
            if not self.more():
                return
            self.think()
            out = self.call("POST", "/api/actions", {"clip_id": clip_id, "person_id": person, "action": aid, "op": "add"})
            if out is not None:
                self.acks.add(Ack(self.name, self.name, "actions", clip_id, person, out["actions"],
                                  out.get("seq", []), out.get("change")))

    def caption(self, clip_id: str) -> None:
        self.think()
        out = self.call("GET", f"/api/vqa/{clip_id}")
        if out is None or not self.more():
            return
        self.think()
        entry = out.get("entry") or {}
        caption = f"An astronaut moves through the module in clip {clip_id}, written by {self.name}."
        body = {"clip_id": clip_id, "caption": caption, "qa_pairs": [
            {"Q": "What is the person doing?", "A": "Floating past the camera."},
            {"Q": "Is anyone holding a tool?", "A": "Not mentioned"}],
            "reviewed": True, "base": entry.get("updated"), "from_draft": False}
        out = self.call("POST", "/api/vqa", body)
        if out is not None:
            self.acks.add(Ack(self.name, self.name, "text", clip_id, 0, caption, out.get("seq", []), out.get("change")))


def _spread(pool: ThreadPoolExecutor, conns: list[Http], clip_id: str, frames: int) -> list:
    """Fetch frames 1..frames, each connection taking every len(conns)-th frame in order."""
    def fetch(k: int):
        return [conns[k].request("GET", f"/clip/{clip_id}/frame/{n}.jpg")[0]
                for n in range(k + 1, frames + 1, len(conns))]

    return list(pool.map(fetch, range(len(conns))))


class Adjudicator(User):
    """As the adjudication page: the list of clips; the first that disagrees, its labels side
    by side and its frames; the final labels (the first annotator's); the list again. Now
    and then the captions' adjudication list. Pauses of ``think`` seconds between steps (two
    before a final: there are two labellings to read); 5 s when nothing disagrees."""

    rounds = 0

    def run(self) -> None:
        login(self.api, self.name)
        with ThreadPoolExecutor(len(self.frames)) as pool:
            while not self.stop.is_set():
                self.rounds += 1
                listing = self.call("GET", "/api/adjudication?status=disagree")  # as the page opens
                disagree = [c["clip_id"] for c in (listing or {}).get("clips", []) if c["status"] == "disagree"]
                if self.rounds % 5 == 0 and self.think():
                    self.call("GET", "/api/text-adjudication")
                if not disagree:
                    self.stop.wait(5)
                    continue
                if not self.think():
                    break
                detail = self.call("GET", f"/api/adjudication/{disagree[0]}")
                if detail is None:
                    continue
                self.show(pool, disagree[0], int(detail["frames"]))
                if not self.think(2):
                    break
                first = detail["labels"][0]
                body = {"clip_id": disagree[0], "excluded": first["excluded"], "reason": first["reason"],
                        "actions": first["actions"], "note": "bench: the first annotator's labels"}
                out = self.call("POST", "/api/final", body)
                if out is not None:
                    self.acks.add(Ack(self.name, "@final", "final", disagree[0], 0, self.name, out.get("seq", [])))


def run_all(threads: list, stop: threading.Event) -> None:
    """Run the clients' ``run`` in threads; the annotators' end stops the adjudicator."""
    workers = [threading.Thread(target=_guard, args=(c,), name=getattr(c, "name", "client"), daemon=True)
               for c in threads]
    for w in workers:
        w.start()
    annotators = [w for w, c in zip(workers, threads) if isinstance(c, Annotator)]
    for w in annotators:
        w.join()
    stop.set()
    for w in workers:
        w.join(timeout=600)


def _guard(client) -> None:
    try:
        client.run()
    except Exception as exc:  # a client that fails is reported, the others go on
        client.errors.append(f"{type(exc).__name__}: {exc}")
        print(f"bench_annotate: client {client.name}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
