"""A real Label Studio server on the loopback address, from its own environment
(tests/tool_envs.py), with an account made at start; the tests talk to its REST API as the
browser does (session cookie and CSRF token: this version turns the legacy API tokens off)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import requests

from tool_envs import env_python

USER, PASSWORD = "lead@example.org", "microg4m-test-pass-81"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, base: str):
        self.base = base
        self.s = requests.Session()
        self.s.get(f"{base}/user/login/", timeout=60)
        r = self.s.post(f"{base}/user/login/", data={"email": USER, "password": PASSWORD,
                                                     "csrfmiddlewaretoken": self.s.cookies.get("csrftoken")},
                        headers={"Referer": f"{base}/user/login/"}, allow_redirects=False, timeout=60)
        assert r.status_code == 302, r.text[-2000:]

    def call(self, method: str, path: str, **kw) -> requests.Response:
        headers = {"X-CSRFToken": self.s.cookies.get("csrftoken", ""), "Referer": f"{self.base}/"}
        return self.s.request(method, f"{self.base}{path}", headers=headers, timeout=300, **kw)

    def ok(self, method: str, path: str, **kw):
        r = self.call(method, path, **kw)
        assert r.status_code in (200, 201), f"{method} {path}: {r.status_code} {r.text[:2000]}"
        return r.json()


@contextlib.contextmanager
def label_studio(data_dir: Path, timeout: float = 900):
    """The server's API (logged in); stopped (its whole process group) on exit."""
    exe = env_python("labelstudio").parent / "label-studio"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(LABEL_STUDIO_USERNAME=USER, LABEL_STUDIO_PASSWORD=PASSWORD, LABEL_STUDIO_BASE_DATA_DIR=str(data_dir))
    log = open(data_dir.parent / "label-studio.log", "w")
    proc = subprocess.Popen([str(exe), "start", "--no-browser", "--host", "127.0.0.1", "--port", str(port),
                             "--data-dir", str(data_dir)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        base, end = f"http://127.0.0.1:{port}", time.monotonic() + timeout
        while True:
            try:
                if requests.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.monotonic() > end:
                raise AssertionError(f"Label Studio did not start: {(data_dir.parent / 'label-studio.log').read_text()[-3000:]}")
            time.sleep(2)
        yield Api(base)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
