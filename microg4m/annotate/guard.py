"""Who may talk to an annotation server, and what every answer carries (both modes).

* **Host** (DNS rebinding): a web page on another site can make a browser send requests
  to 127.0.0.1 under its own host name. Every request must name, in its ``Host`` header,
  an address this server answers to (the loopback names, the ``--host`` it was given, or
  the names a reverse proxy forwards).
* **Origin** (CSRF): a state-changing request that carries an ``Origin`` header must come
  from this server's own origin: the same scheme, host and port as the request itself
  (``http://`` + its ``Host``; ``https`` when a trusted proxy says so, serving.py). A page
  on another port of the same host is another origin, and is refused.
* **Limits**: request bodies of at most :data:`MAX_BODY` bytes (413; waitress refuses
  larger ones before buffering them, serving.py); JSON bodies nested at most
  :data:`MAX_JSON_DEPTH` deep (api.json_body).
* **Framing**: no page may be shown in another site's frame (``X-Frame-Options``, CSP
  ``frame-ancestors``), no content sniffing, no Referer to other sites.
* **Token** (single-user mode, :func:`require_token`): every request must carry the
  random token printed at start, so that another account on the same machine cannot use
  the page (it can reach 127.0.0.1 too).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Iterable
from urllib.parse import urlencode, urlsplit

from flask import Flask, Response, jsonify, redirect, request

LOOPBACK = ("127.0.0.1", "localhost", "::1")
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
MAX_BODY = 1 << 20  # bytes: the largest request body either mode reads (a caption is a few KiB)
MAX_JSON_DEPTH = 16  # nesting of a JSON body (the deepest the pages send is 4)
DEFAULT_PORTS = {"http": 80, "https": 443}
TOKEN_HEADER = "Authorization"  # "Bearer TOKEN"
TOKEN_PARAM = "token"
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",  # no clicks on labels through another site's frame
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def host_name(value: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8765`` -> ``::1``), lower case."""
    return split_host(value)[0]


def split_host(value: str) -> tuple[str, int | None]:
    """(host, port or None) of a ``Host`` header, the host in lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        host, port = value.split(":")
    else:
        host, port = value, ""
    return host, (int(port) if port.isascii() and port.isdigit() else None if not port else -1)


def same_origin(origin: str, scheme: str, host_header: str) -> bool:
    """Whether ``origin`` (an Origin header) is the origin of a request made with ``scheme``
    to ``host_header``: the same scheme, host and port (default ports filled in)."""
    if origin == "null":
        return False
    try:
        parts = urlsplit(origin)
        o_port = parts.port
    except ValueError:
        return False
    o_scheme = parts.scheme.lower()
    if o_scheme not in DEFAULT_PORTS or not parts.hostname:
        return False
    host, port = split_host(host_header)
    return (o_scheme, parts.hostname.lower(), o_port or DEFAULT_PORTS[o_scheme]) == (
        scheme.lower(), host, port or DEFAULT_PORTS.get(scheme.lower()))


def allowed_hosts(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The loopback names, the address the server binds, and any names given."""
    names = {*LOOPBACK, host_name(bind_host), *(host_name(h) for h in extra)}
    names.discard("0.0.0.0")  # binding every address names none of them
    names.discard("::")
    return frozenset(n for n in names if n)


def install(app: Flask, hosts: Iterable[str]) -> None:
    """Refuse (403, JSON error) requests with a foreign Host, and state-changing requests
    from a foreign Origin; limit the body size; the framing headers on every answer."""
    allowed = frozenset(hosts)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY

    @app.before_request
    def _check_host_and_origin():
        host = host_name(request.host or "")
        if host not in allowed:
            return jsonify(error=f"refused: Host {request.host!r} is not an address this server "
                                 f"answers to ({', '.join(sorted(allowed))})"), 403
        origin = request.headers.get("Origin")
        if request.method not in SAFE_METHODS and origin is not None:
            if not same_origin(origin, request.scheme, request.host):
                return jsonify(error=f"refused: Origin {origin!r} is not this server "
                                     f"({request.scheme}://{request.host})"), 403
        return None

    @app.after_request
    def _headers(resp):
        for name, value in SECURITY_HEADERS.items():
            resp.headers.setdefault(name, value)
        return resp


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


def token_cookie(host_header: str) -> str:
    """The token's cookie name for the port the browser talks to (cookies are not kept
    apart by port, two pages on two ports must not overwrite each other's)."""
    _, port = split_host(host_header)
    return f"microg4m-annotate-{port if port and port > 0 else 80}"


def require_token(app: Flask, token: str) -> None:
    """Refuse (401) every request that does not carry ``token``: in the cookie the page's
    first address (``/?token=TOKEN``) sets, in ``Authorization: Bearer TOKEN``, or in a
    ``token`` query parameter. ``/`` with the token in the address answers with the cookie
    and a redirect to the same page without it (out of the address bar and the history)."""
    want = _digest(token)

    def given() -> tuple[str | None, str]:
        auth = request.headers.get(TOKEN_HEADER, "")
        if auth.startswith("Bearer "):
            return auth[7:].strip(), "header"
        if TOKEN_PARAM in request.args:
            return request.args.get(TOKEN_PARAM), "query"
        return request.cookies.get(token_cookie(request.host or "")), "cookie"

    @app.before_request
    def _check_token():
        if request.endpoint == "favicon":
            return None
        sent, how = given()
        if sent is None or not hmac.compare_digest(_digest(sent), want):
            if request.method == "GET" and request.path == "/":
                return Response("microg4m annotate: open the address that `microg4m annotate` printed "
                                "(it carries the page's access token, ?token=...).\n", status=401,
                                mimetype="text/plain")
            return jsonify(error="refused: no valid access token (open the address microg4m annotate printed, "
                                 "or send Authorization: Bearer TOKEN)"), 401
        if how == "query" and request.method == "GET" and request.path == "/":
            rest = [(k, v) for k, v in request.args.items(multi=True) if k != TOKEN_PARAM]
            resp = redirect(request.path + (f"?{urlencode(rest)}" if rest else ""), code=303)
            resp.set_cookie(token_cookie(request.host or ""), token, path="/", httponly=True, samesite="Strict")
            return resp
        return None
