"""Another user's latency while someone floods the team server's login (issue 34).

The team server runs as a lab runs it (``python -m microg4m.annotate.team serve``, the
production server, default settings) over a small results folder. A logged-in annotator
asks ``GET /api/state`` again and again: first on a quiet server, then while ``--flood``
threads post wrong passwords to ``/login`` as fast as they can (one client address, one
account, as a guessing script would). With the login throttling on (the defaults of
``team.login``), the flood is refused after a few password checks without any hashing;
``--throttle off`` sets the limits out of reach, as before issue 34 (every attempt costs a
scrypt hash). Prints the latencies (median, 95th percentile) and the flood's answers as
JSON, with the CPU's model and instruction sets.

    .venv/bin/python bench/bench_login_flood.py                      # throttling on
    .venv/bin/python bench/bench_login_flood.py --throttle off       # as before issue 34

Latency figures need a quiet machine (nothing else running); on a loaded one they only
show the order of magnitude.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import yaml  # noqa: E402

from microg4m.annotate.team import accounts  # noqa: E402
from microg4m.annotate.team.db import connect  # noqa: E402
from test_team_load import build_many  # noqa: E402  (the load test's results folder: 24 clips, no videos)

PASSWORD = "violet-kettle-drums-9"


def call(port: int, method: str, path: str, headers=None, form=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = {"Host": f"127.0.0.1:{port}", **(headers or {})}
    body = None
    if form is not None:
        body, h["Content-Type"] = urllib.parse.urlencode(form), "application/x-www-form-urlencoded"
    try:
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace"), resp
    finally:
        conn.close()


def login(port: int, name: str, password: str) -> tuple[int, str | None]:
    """One login through the form: (status, the session cookie or None)."""
    _, page, resp = call(port, "GET", "/login")
    cookie = resp.getheader("Set-Cookie").split(";", 1)[0]
    token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    status, _, resp = call(port, "POST", "/login", {"Cookie": cookie},
                           {"csrf": token, "name": name, "password": password})
    session = next((c.split(";", 1)[0] for c in resp.headers.get_all("Set-Cookie") or []
                    if c.startswith("__Host-microg4m-team=")), None)
    return status, session


def latencies(port: int, cookie: str, seconds: float) -> list[float]:
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        status, _, _ = call(port, "GET", "/api/state", {"Cookie": cookie})
        assert status == 200, status
        out.append(time.perf_counter() - t)
    return out


def summary(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"n": len(xs), "median_ms": round(1000 * statistics.median(xs), 1),
            "p95_ms": round(1000 * xs[math.ceil(0.95 * len(xs)) - 1], 1)}  # nearest rank


def cpu() -> str:
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return ""
    model = re.search(r"Model name:\s*(.+)", info)
    flags = set(re.search(r"Flags:\s*(.+)", info).group(1).split()) if "Flags:" in info else set()
    wanted = [f for f in ("avx2", "fma", "vaes", "avx512f", "amx_tile") if f in flags]
    return f"{model.group(1).strip() if model else '?'}; {', '.join(wanted)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flood", type=int, default=32, help="threads posting wrong passwords")
    ap.add_argument("--seconds", type=float, default=10, help="how long each phase lasts")
    ap.add_argument("--throttle", choices=["on", "off"], default="on")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        build_many(work / "results")
        team = {"database": "annotations/team.sqlite"}
        if args.throttle == "off":
            team["login"] = {"account_failures": 10**9, "address_failures": 10**9}
        (work / "config").mkdir()
        (work / "config" / "config.yaml").write_text(yaml.safe_dump({
            "results": "results", "export": {"label_map": str(REPO / "annotations" / "label_map.pbtxt")},
            "team": team}))
        conn = connect(work / "annotations" / "team.sqlite")
        for name in ("alice", "bob"):
            accounts.add_user(conn, name, "annotator", PASSWORD)
        conn.close()
        proc = subprocess.Popen([sys.executable, "-m", "microg4m.annotate.team", "serve", "--port", "0"], cwd=work,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline()).group(1))
            status, cookie = login(port, "bob", PASSWORD)
            assert status == 303 and cookie
            quiet = latencies(port, cookie, args.seconds)
            answers: dict[int, int] = {}
            stop = threading.Event()
            lock = threading.Lock()

            def flood():
                while not stop.is_set():
                    status, _ = login(port, "alice", "a-wrong-guess")
                    with lock:
                        answers[status] = answers.get(status, 0) + 1

            threads = [threading.Thread(target=flood) for _ in range(args.flood)]
            for t in threads:
                t.start()
            time.sleep(1)  # the flood under way
            busy = latencies(port, cookie, args.seconds)
            stop.set()
            for t in threads:
                t.join()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    print(json.dumps({"throttle": args.throttle, "flood_threads": args.flood, "cpu": cpu(),
                      "api_state_quiet": summary(quiet), "api_state_during_flood": summary(busy),
                      "flood_answers": {str(k): v for k, v in sorted(answers.items())}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
