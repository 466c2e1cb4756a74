"""Who may talk to an annotation server: Host and Origin checks (DNS rebinding, CSRF).

A web page on another site can make a browser send requests to 127.0.0.1 under its own
host name (DNS rebinding) or post to it from its own origin. So every request must name,
in its ``Host`` header, an address this server answers to (the loopback names, or the
``--host`` it was given, or the names a reverse proxy forwards); a state-changing request
that carries an ``Origin`` header must come from one of those hosts too.
"""

from __future__ import annotations

from typing import Iterable
from urllib.parse import urlsplit

from flask import Flask, jsonify, request

LOOPBACK = ("127.0.0.1", "localhost", "::1")
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


def host_name(value: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8765`` -> ``::1``), lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def allowed_hosts(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The loopback names, the address the server binds, and any names given."""
    names = {*LOOPBACK, host_name(bind_host), *(host_name(h) for h in extra)}
    names.discard("0.0.0.0")  # binding every address names none of them
    names.discard("::")
    return frozenset(n for n in names if n)


def install(app: Flask, hosts: Iterable[str]) -> None:
    """Refuse (403, JSON error) requests with a foreign Host, and state-changing requests
    with a foreign Origin."""
    allowed = frozenset(hosts)

    @app.before_request
    def _check_host_and_origin():
        host = host_name(request.host or "")
        if host not in allowed:
            return jsonify(error=f"refused: Host {request.host!r} is not an address this server "
                                 f"answers to ({', '.join(sorted(allowed))})"), 403
        origin = request.headers.get("Origin")
        if request.method not in SAFE_METHODS and origin is not None:
            origin_host = urlsplit(origin).hostname if origin != "null" else None
            if origin_host is None or origin_host.lower() not in allowed:
                return jsonify(error=f"refused: Origin {origin!r} is not this server"), 403
        return None
