"""A real HTTP server on 127.0.0.1 for the download tests (yt-dlp fetches from it).

It serves the files of a folder (with Last-Modified, as any web server), answers
``/status/<code>`` with that HTTP status, and ``/hang`` after ``hang_seconds`` (longer than
the client's socket timeout).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _Handler(SimpleHTTPRequestHandler):
    hang_seconds = 5.0

    def log_message(self, *args):  # keep pytest's output clean
        pass

    def _special(self) -> bool:
        if self.path.startswith("/status/"):
            code = int(self.path.split("/")[2])
            body = f"status {code}\n".encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            if code == 429:
                self.send_header("Retry-After", "3600")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return True
        if self.path.startswith("/hang"):
            time.sleep(self.hang_seconds)
            return True
        return False

    def do_GET(self):
        self.server.paths.append(self.path)
        if not self._special():
            super().do_GET()

    def do_HEAD(self):
        if not self._special():
            super().do_HEAD()


class _Base(str):
    """The base URL; ``paths``: the paths the server was asked for."""

    paths: list


@contextlib.contextmanager
def serve(root: str | Path):
    """Serve ``root`` on a free loopback port; yields the base URL (no trailing slash)."""
    handler = functools.partial(_Handler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.paths = []  # every GET, in order
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = _Base(f"http://127.0.0.1:{server.server_address[1]}")
    base.paths = server.paths
    try:
        yield base
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
