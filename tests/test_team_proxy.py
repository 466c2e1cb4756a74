"""The reverse-proxy example of docs/team.md (docs/team-nginx.conf) run for real: Debian's nginx
terminates TLS in front of the team server, and a headless Chromium logs in through it.

Only the name, the certificate paths and the ports of the example are replaced (a
self-signed certificate for ``annotate.test``, free ports on 127.0.0.1); skipped when
nginx or openssl is not installed (``apt-get install nginx-light``).
"""

from __future__ import annotations

import http.client
import re
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from microg4m.annotate.guard import allowed_hosts
from microg4m.annotate.team.server import create_app

from team_setup import REPO_DOCS, make_project, password, serving

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
NAME = "annotate.test"
pytestmark = pytest.mark.skipif(not (Path(NGINX).is_file() and shutil.which("openssl")),
                                reason="needs nginx and openssl (apt-get install nginx-light openssl)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def site(upstream: int, http_port: int, https_port: int, cert: Path, key: Path) -> str:
    text = (REPO_DOCS / "team-nginx.conf").read_text()
    for old, new in ((r"listen \[::\]:\d+[^;]*;\n", ""), (r"listen 80;", f"listen 127.0.0.1:{http_port};"),
                     (r"listen 443 ssl;", f"listen 127.0.0.1:{https_port} ssl;"),
                     (r"annotate\.lab\.example\.org", NAME), (r"127\.0\.0\.1:8765;", f"127.0.0.1:{upstream};"),
                     (r"ssl_certificate\s+\S+;", f"ssl_certificate {cert};"),
                     (r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {key};")):
        text, n = re.subn(old, new, text)
        assert n, old  # the example still has the line this test adapts
    return text


@pytest.fixture
def proxied(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={NAME}",
                    "-addext", f"subjectAltName=DNS:{NAME}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    project = make_project(tmp_path)
    with serving(create_app(project, allowed_hosts("127.0.0.1", [NAME])), trusted_proxy="127.0.0.1") as upstream:
        http_port, https_port = free_port(), free_port()
        conf = tmp_path / "nginx"
        conf.mkdir()
        (conf / "site.conf").write_text(site(upstream, http_port, https_port, cert, key))
        (conf / "nginx.conf").write_text(
            f"daemon off;\nmaster_process off;\npid {conf}/nginx.pid;\nerror_log {conf}/error.log;\n"
            f"events {{}}\nhttp {{\n  access_log off;\n"
            + "".join(f"  {k}_temp_path {conf}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            + f"  include {conf}/site.conf;\n}}\n")
        test = subprocess.run([NGINX, "-t", "-p", str(conf), "-c", str(conf / "nginx.conf")], capture_output=True,
                              text=True)
        assert test.returncode == 0, test.stderr
        proc = subprocess.Popen([NGINX, "-p", str(conf), "-c", str(conf / "nginx.conf")],
                                stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", https_port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            yield project, http_port, https_port, cert
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def https(port: int, cert: Path, method: str, path: str, headers: dict, body: str | None = None):
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.check_hostname = False  # the connection goes to 127.0.0.1; the certificate is pinned by cafile
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp, data


def test_nginx_example_serves_team_mode_over_tls(proxied):
    project, http_port, https_port, cert = proxied
    # plain HTTP is sent to HTTPS
    conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=30)
    conn.request("GET", "/login", headers={"Host": NAME})
    resp = conn.getresponse()
    assert resp.status == 301 and resp.getheader("Location") == f"https://{NAME}/login"
    conn.close()
    # through TLS: the Host the proxy passes on is accepted; a foreign one still refused
    resp, data = https(https_port, cert, "GET", "/login", {"Host": NAME})
    assert resp.status == 200 and b"Log in" in data and "Secure" in resp.getheader("Set-Cookie")
    assert resp.getheader("Strict-Transport-Security") == "max-age=31536000"
    resp, data = https(https_port, cert, "GET", "/login", {"Host": "evil.example"})
    assert resp.status == 403 and b"is not an address" in data

    from test_annotate_browser import ARGS, CHROMIUM

    if not CHROMIUM.is_file():
        pytest.skip("needs Debian's chromium for the browser half")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=[*ARGS, f"--host-resolver-rules=MAP {NAME} 127.0.0.1"])
        try:
            page = browser.new_context(ignore_https_errors=True).new_page()
            base = f"https://{NAME}:{https_port}"
            page.goto(base + "/")
            assert page.url == base + "/login"
            page.fill("#name", "alice")
            page.fill("#password", password("alice"))
            page.click("#submit")
            page.wait_for_url(base + "/")
            page.wait_for_function("() => (document.getElementById('clip-id') || {}).textContent === 'dancer_000'")
            page.click(".person.selected .picker label[data-action='14']")
            page.wait_for_selector(".person.selected .picker label[data-action='14'] input:checked")
            cookies = {c["name"]: c for c in page.context.cookies()}
            session = cookies["__Host-microg4m-team"]
            assert session["secure"] and session["httpOnly"] and session["sameSite"] == "Strict"
        finally:
            browser.close()
    conn = project.connect()
    rows = [tuple(r) for r in conn.execute("SELECT who, clip_id, after FROM changes")]
    conn.close()
    assert rows == [("alice", "dancer_000", "[14]")]
    # guessing passwords: the login page is rate-limited by the proxy
    statuses = [https(https_port, cert, "GET", "/login", {"Host": NAME})[0].status for _ in range(15)]
    assert statuses[0] == 200 and 503 in statuses, statuses
