"""Serving the annotation pages with a production WSGI server (waitress), and a clean stop.

waitress (pure Python, no C compiler, runs wherever microg4m runs) answers each request
in one of ``threads`` worker threads; the main thread runs its socket loop. SIGTERM (what
systemd, Docker and batch systems send) and SIGINT (Ctrl-C) stop it cleanly:

1. the listening socket closes at once: new connections are refused;
2. requests in flight finish, their answers are sent, and a request whose body is still
   arriving is read and answered (at most ``shutdown_timeout`` seconds in all); idle
   keep-alive connections are closed;
3. then ``on_stop`` runs (team mode: the workflow's files are brought in step with the
   database, the write-ahead log is merged into the database file and the connection
   closed), and :meth:`Server.run` returns what it did.

A second signal during step 2 stops waiting. A process started with SIGINT ignored (a
background job of a non-interactive shell, ``nohup``-like wrappers) keeps ignoring it, as
the convention for background jobs is; SIGTERM then stops it.

Limits that keep a careless or hostile client from holding the server: a request body
larger than :data:`~microg4m.annotate.guard.MAX_BODY` is refused (413) before it is
buffered, and a connection that has not sent a whole request head ``header_timeout``
seconds after it started one (or after it opened) is closed, so that half-sent requests
cannot hold every connection for ``channel_timeout`` (waitress has no such setting: the
socket loop here sweeps the connections). Behind a reverse proxy, ``trusted_proxy`` names
the proxy whose ``X-Forwarded-For`` (the client's address) and ``X-Forwarded-Proto``
(``https``) are believed; from anyone else these headers are dropped.
"""

from __future__ import annotations

import signal
import threading
import time
import dataclasses

import waitress
from waitress import wasyncore
from waitress.channel import HTTPChannel

from .guard import MAX_BODY

DRAIN_POLL = 0.05  # seconds between looks at the connections while stopping
SWEEP_EVERY = 0.5  # seconds between looks for connections whose request head is late


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """The server's settings (config ``team.server``; the defaults are the schema's)."""

    threads: int = 8  # worker threads: requests answered at once
    connection_limit: int = 100  # open connections at most (more wait in the listen backlog)
    channel_timeout: float = 120  # seconds an idle connection is kept open
    shutdown_timeout: float = 30  # seconds a stop waits for the requests in flight
    header_timeout: float = 10  # seconds a connection may take to send a request's head
    trusted_proxy: str | None = None  # the reverse proxy whose X-Forwarded-For/-Proto are believed

    def check(self) -> "ServerSettings":
        """ValueError naming a setting outside the schema's bounds (``team.server``)."""
        from microg4m import config

        config.validate_section("team.server", dataclasses.asdict(self))
        return self


def _busy(ch: HTTPChannel) -> bool:
    """A request on the connection is being received, answered or sent."""
    return bool(ch.requests) or ch.request is not None or ch.total_outbufs_len > 0


class _Channel(HTTPChannel):
    """waitress's connection, which also notes since when it waits for a request head:
    from the connection's start, and from the first byte of each later request (an idle
    keep-alive connection between requests is ``channel_timeout``'s)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.head_since: float | None = self.creation_time

    def received(self, data):
        if data and self.request is None and self.head_since is None:
            self.head_since = time.time()  # a new request begins
        out = super().received(data)
        if self.request is None or self.request.headers_finished:
            self.head_since = None  # the head is complete (or the request is)
        return out

    def head_late(self, now: float, timeout: float) -> bool:
        return self.head_since is not None and not self.requests and now - self.head_since > timeout


class Server:
    """One waitress server on ``host:port`` (port 0: a free one, see :attr:`port`)."""

    def __init__(self, app, host: str, port: int, settings: ServerSettings = ServerSettings()):
        self.settings = settings.check()
        self._map: dict = {}
        proxy = {}
        if settings.trusted_proxy:
            proxy = dict(trusted_proxy=settings.trusted_proxy, trusted_proxy_count=1,
                         trusted_proxy_headers={"x-forwarded-for", "x-forwarded-proto"})
        self._server = waitress.create_server(
            app, map=self._map, host=host, port=port, threads=settings.threads,
            connection_limit=settings.connection_limit, channel_timeout=settings.channel_timeout,
            max_request_body_size=MAX_BODY, ident="microg4m", asyncore_loop_timeout=1,
            clear_untrusted_proxy_headers=True, **proxy)
        self._server.channel_class = _Channel
        self._next_sweep = 0.0
        self.host, self.port = self._server.effective_host, int(self._server.effective_port)
        self._stop = threading.Event()
        self._force = threading.Event()
        self.stopped = threading.Event()

    def stop(self) -> None:
        """Begin the clean stop (from a signal handler or another thread); a second call
        stops waiting for the requests in flight."""
        if self._stop.is_set():
            self._force.set()
        self._stop.set()
        try:
            self._server.pull_trigger()  # wake the socket loop
        except OSError:  # its trigger already closed: the loop is ending (it also wakes every second)
            pass

    def _channels(self) -> list[HTTPChannel]:
        return [ch for ch in list(self._map.values()) if isinstance(ch, HTTPChannel)]

    def run(self) -> dict:
        """Serve until :meth:`stop`; then stop cleanly. Returns ``{in_flight, finished,
        abandoned, seconds}`` of the stop."""
        adj = self._server.adj
        try:
            while not self._stop.is_set():
                wasyncore.loop(timeout=min(adj.asyncore_loop_timeout, SWEEP_EVERY), map=self._map,
                               use_poll=adj.asyncore_use_poll, count=1)
                self._close_late_heads()
            return self._drain()
        finally:
            self.stopped.set()

    def _close_late_heads(self) -> None:
        """Close the connections whose request head is later than ``header_timeout``."""
        now = time.time()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY
        for ch in self._channels():
            if isinstance(ch, _Channel) and ch.head_late(now, self.settings.header_timeout):
                ch.will_close = True  # closed by the loop (handle_write)

    def _drain(self) -> dict:
        t0 = time.monotonic()
        deadline = t0 + self.settings.shutdown_timeout
        wasyncore.dispatcher.close(self._server)  # the listening socket only (the trigger stays)
        in_flight = sum(_busy(ch) for ch in self._channels())
        while True:
            channels = self._channels()
            busy = [ch for ch in channels if _busy(ch)]
            for ch in channels:
                if ch not in busy and not ch.will_close:
                    ch.will_close = True  # an idle keep-alive connection: closed by the loop
            if not channels or self._force.is_set() or time.monotonic() >= deadline:
                break
            wasyncore.loop(timeout=DRAIN_POLL, map=self._map, count=1)
        abandoned = len([ch for ch in self._channels() if _busy(ch)])
        self._server.task_dispatcher.shutdown(cancel_pending=True, timeout=max(0.1, deadline - time.monotonic()))
        wasyncore.close_all(self._map)
        return {"in_flight": in_flight, "finished": in_flight - abandoned, "abandoned": abandoned,
                "seconds": round(time.monotonic() - t0, 3)}


def run_until_signalled(server: Server, ready=None) -> dict:
    """Run ``server`` in this (the main) thread until SIGTERM or SIGINT; returns :meth:`Server.run`'s.

    ``ready()`` runs once the signals are caught (print the address there: whoever reads
    it may send a signal at once)."""
    def handler(signum, frame):
        server.stop()

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(sig) is signal.SIG_IGN:
            continue  # started with it ignored (a background job): keep ignoring it
        previous[sig] = signal.signal(sig, handler)
    try:
        if ready is not None:
            ready()
        return server.run()
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
