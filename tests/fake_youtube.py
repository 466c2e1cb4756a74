"""YouTube's servers played on 127.0.0.1, for yt-dlp's own YouTube extractor.

yt-dlp runs unchanged, with its ``proxy`` option pointing here: this proxy accepts each
CONNECT, speaks TLS with a throw-away certificate (yt-dlp runs with
``nocheckcertificate``) and answers the requests of the extractor: the innertube
``/youtubei/v1/player`` call with a player response whose ``playabilityStatus`` is the
one under test (what YouTube sends for a bot check, a private video ...), ``{}`` for
the other API calls, 404 for anything else. So the messages, and yt-dlp's rewording of
them (the cookies hint, the geo-restriction error, the rate-limit advice), are the ones
a real download would raise. Needs the ``openssl`` command (for the certificate).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOSTS = ("www.youtube.com", "youtube.com", "m.youtube.com", "youtubei.googleapis.com", "music.youtube.com")


def _text(s: str) -> dict:
    return {"simpleText": s}


def playability(status: str, reason: str, subreason: str | None = None, **extra) -> dict:
    """A player response that plays nothing, for the reason given (YouTube's shape)."""
    error = {"reason": _text(reason)}
    if subreason:
        error["subreason"] = _text(subreason)
    return {"playabilityStatus": {"status": status, "reason": reason,
                                  "errorScreen": {"playerErrorMessageRenderer": error}, **extra}}


class _Api(BaseHTTPRequestHandler):
    """Requests inside one TLS tunnel."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _reply(self, code: int, body: dict | None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.server.paths.append(self.path)
        if self.path.startswith("/youtubei/v1/player"):
            status, body = self.server.player
            self._reply(status, body)
        elif self.path.startswith("/youtubei/v1/"):
            self._reply(200, {"contents": {}})
        else:
            self._reply(404, None)

    def do_GET(self):
        self.server.paths.append(self.path)
        if self.path.startswith("/watch?"):  # a watch page without player data: yt-dlp asks the API
            data = b"<!DOCTYPE html><html><head><title>YouTube</title></head><body></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._reply(404, None)


class _Proxy(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_CONNECT(self):
        self.send_response(200, "Connection established")
        self.end_headers()
        try:
            tls = self.server.context.wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError):
            self.close_connection = True
            return
        _Api(tls, self.client_address, self.server)
        self.close_connection = True


def _certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    san = ",".join(f"DNS:{h}" for h in HOSTS)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=www.youtube.com", "-addext", f"subjectAltName={san}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def available() -> bool:
    return shutil.which("openssl") is not None


@contextlib.contextmanager
def serve(folder: Path):
    """Yields the server: set ``server.player = (HTTP status, player response)``; its
    ``proxy`` attribute is the URL for yt-dlp's ``proxy`` option."""
    cert, key = _certificate(folder)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    server.daemon_threads = True
    server.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.context.load_cert_chain(cert, key)
    server.player = (200, playability("OK", ""))
    server.paths = []
    server.proxy = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
