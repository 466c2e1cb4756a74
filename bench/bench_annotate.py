"""Team mode at the paper's scale: nine annotators and an adjudicator at once against the
production server, on a results folder of MicroG-4M's shape.

```bash
python bench/bench_annotate.py                                 # 4,759 clips in 100 units, this checkout
python bench/bench_annotate.py --clips 47590                   # ten times the clips (in 1,000 units)
python bench/bench_annotate.py --code /tmp/main --code .       # main's code beside this one, same folder
python bench/bench_annotate.py --stop kill                     # a SIGKILL halfway: nothing acknowledged lost
python bench/bench_annotate.py --profile                       # where a request's time goes (cProfile)
```

1. Builds (once; reused while its arguments are the same) a results folder of the paper's
   shape under ``--work``: ``--clips`` kept clips in ``--units`` units, 1-5 persons per clip,
   every clip a hard link to one of a few real clips cut from the package footage, with the
   workflow's files (``units.tsv``, manifests, filter decisions, tracks, corrected tracks;
   ``--jpeg-frames``: the export's JPEG frames too). See annotate_folder.py.
2. For each ``--code`` (a checkout of microg4m; the server runs with ``PYTHONPATH`` set to
   it): a fresh team database and label files, ``--annotators`` annotator accounts and one
   adjudicator made with that code's command line, then ``microg4m team serve`` (waitress)
   as a subprocess. The time until it answers is its start-up.
3. Drives all annotators at once, as the page does: the page's state, each clip of their
   queue opened (the clip, then its frames as that code's pages load them: one request for
   every frame, or one per frame over ``--frame-connections`` connections), an
   action per person (sometimes two), now and then an exclusion, a caption with QA pairs
   for about a quarter of the clips, a reload every ten clips; ``--actions`` requests each
   (frames not counted), ``--think`` seconds apart on average. Meanwhile the adjudicator
   works as the adjudication page: the list, a clip that disagrees with its frames, its
   final labels, the list again.
4. Stops the server with SIGTERM (``--stop kill``: SIGKILL when half the actions are
   done), then checks that every write the server acknowledged is in the history with the
   value it answered.
5. Reports per request kind p50/p95/p99 latency (ms) and errors, the server's peak memory
   (RSS summed over its process tree, sampled every 0.2 s), its start-up, and the writes
   acknowledged, found and missing: ``bench/out/bench_annotate.{md,json}``.

The clients run on the same machine as the server (on 2 cores they take some of its
CPU); latency figures need a machine with nothing else running.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import yaml

from common import REPO, git_rev  # noqa: F401  (sets sys.path)

import annotate_client as ac  # noqa: E402
import annotate_folder  # noqa: E402

READY = re.compile(r"http://127\.0\.0\.1:(\d+)/")
PROFILER = Path(__file__).resolve().parent / "annotate_profiled.py"


# ---------------------------------------------------------------- the code under test


def code_env(code: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code), YOLO_OFFLINE="1")
    env.pop("PYTHONSTARTUP", None)
    found = subprocess.run([sys.executable, "-c", "import microg4m; print(microg4m.__file__)"], env=env, cwd="/",
                           capture_output=True, text=True).stdout.strip()
    if not found.startswith(str(code)):
        raise SystemExit(f"--code {code}: python imports microg4m from {found or 'nowhere'}, not from it")
    return env


def code_rev(code: Path) -> str:
    out = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(code), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (out.stdout.strip() or "?") + ("+changes" if dirty else "")


# ---------------------------------------------------------------- the server


LIVE: list["Server"] = []  # servers still running: killed if the bench itself is stopped or fails


@atexit.register
def _kill_live() -> None:
    for server in list(LIVE):
        server.kill()


class Server:
    """``microg4m team serve`` as a subprocess, its memory sampled."""

    def __init__(self, cmd: list[str], env: dict, cwd: Path, log: Path, start_timeout: float):
        self.log = log
        t0 = time.perf_counter()
        self._err = open(log, "w")
        self.proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=self._err, text=True,
                                     start_new_session=True)
        LIVE.append(self)
        self.peak = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        found: list[int] = []
        ready = threading.Event()
        threading.Thread(target=self._ready, args=(found, ready), daemon=True).start()
        ended = ready.wait(start_timeout)  # set when the server printed its address or ended
        if not found:
            self.kill()
            if ended:
                raise RuntimeError(f"the server ended (exit {self.proc.returncode}) before it answered; see {log}")
            raise RuntimeError(f"the server did not start within {start_timeout:g} s; see {log}")
        self.port = found[0]
        self.startup = time.perf_counter() - t0

    def _ready(self, found: list[int], ready: threading.Event) -> None:
        for line in self.proc.stdout:
            m = READY.search(line)
            if m:
                found.append(int(m.group(1)))
                break
        ready.set()  # found, or the server ended
        for _ in self.proc.stdout:  # keep draining
            pass

    def _sample(self) -> None:
        ps = psutil.Process(self.proc.pid)
        while not self._stop.is_set() and self.proc.poll() is None:
            try:
                rss = sum(p.memory_info().rss for p in [ps, *ps.children(recursive=True)])
                self.peak = max(self.peak, rss)
            except psutil.Error:
                pass
            time.sleep(0.2)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)
        self._stop.set()
        if self in LIVE:
            LIVE.remove(self)

    def terminate(self, timeout: float = 300) -> dict:
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = "killed after the SIGTERM timeout"
        self._stop.set()
        self._err.close()
        if self in LIVE:
            LIVE.remove(self)
        tail = self.log.read_text().strip().splitlines()[-1:] or [""]
        return {"rc": rc, "seconds": round(time.perf_counter() - t0, 2), "last_line": tail[0]}


def login_limits(code: Path, logins: int, threads: int) -> dict:
    """``team.login`` for the bench, or {} to keep the code's defaults.

    All the bench's users log in from 127.0.0.1, once each, at about the same time. Login
    throttling (issue 34) counts an attempt against its address before it checks the
    password and takes it off again when the login succeeds, so at most the logins in
    flight at once are counted: ``min(logins, threads)``. Only when that reaches the
    address limit of the code's schema would the bench lock itself out; then the limit is
    set explicitly, just above it, and said so. A code without throttling (f750555) has
    no such setting."""
    schema = yaml.safe_load((code / "microg4m" / "schemas" / "config.schema.yaml").read_text())
    login = schema["properties"]["team"]["properties"].get("login")
    if login is None:
        return {}
    limit = login["properties"]["address_failures"]["default"]
    at_once = min(logins, threads)
    if at_once < limit:
        return {}
    print(f"bench_annotate: {logins} logins from 127.0.0.1 ({at_once} at once) reach team.login.address_failures "
          f"= {limit}: the bench sets it to {at_once + 1}", flush=True)
    return {"address_failures": at_once + 1}


def write_config(run: Path, results: Path, code: Path, threads: int, logins: int) -> Path:
    ann = run / "annotations"
    ann.mkdir(parents=True)
    team = {"database": str(ann / "team.sqlite"), "report_dir": str(ann / "team"), "server": {"threads": threads}}
    if limits := login_limits(code, logins, threads):
        team["login"] = limits
    cfg = {"results": str(results),
           "export": {"actions": str(ann / "actions.csv"), "label_map": str(code / "annotations" / "label_map.pbtxt")},
           "filter": {"screening": str(ann / "screening_excluded.txt")},
           "vqa": {"reviews": str(ann / "vqa_reviews.json")},
           "team": team}
    path = run / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# ---------------------------------------------------------------- checks and figures


def verify(db: Path, acks: list[ac.Ack]) -> dict:
    """Every acknowledged write's history row exists with the value answered: the rows of
    the seqs answered (the adjudicator's), or the ``change``-th row of the annotator's layer."""
    conn = sqlite3.connect(db)  # opening recovers the write-ahead log after a SIGKILL
    try:
        rows = {r[0]: r[1:] for r in conn.execute("SELECT seq, who, layer, kind, clip_id, person_id, after FROM changes")}
    finally:
        conn.close()
    of_layer: dict[str, list[int]] = {}
    for seq in sorted(rows):
        of_layer.setdefault(rows[seq][1], []).append(seq)
    missing, wrong, with_rows = [], [], 0
    for a in acks:
        if a.change is not None:
            mine = of_layer.get(a.layer, [])
            seqs = [mine[a.change - 1]] if 0 < a.change <= len(mine) else []
            if not seqs:
                missing.append(f"{a.who} {a.kind} {a.clip} p{a.person}: change {a.change} of {len(mine)} rows")
                with_rows += 1
                continue
        else:
            seqs = a.seqs
        if not seqs:
            continue  # acknowledged without a change (the value was already so)
        with_rows += 1
        gone = [s for s in seqs if s not in rows]
        if gone:
            missing.append(f"{a.who} {a.kind} {a.clip} p{a.person}: seqs {gone}")
            continue
        who, layer, kind, clip, person, after = rows[seqs[0]]
        value = json.loads(after) if after is not None else None
        if a.kind == "final":
            ok = clip == a.clip and any(rows[s][2] == "resolved" and json.loads(rows[s][5] or "null") == a.value
                                        for s in seqs)
        elif a.kind == "text":
            ok = (who, layer, kind, clip) == (a.who, a.layer, "text", a.clip) and value["caption"] == a.value
        elif a.kind == "exclusion":
            ok = (who, layer, kind, clip) == (a.who, a.layer, "exclusion", a.clip) and value == a.value
        else:
            ok = (who, layer, kind, clip, person) == (a.who, a.layer, a.kind, a.clip, a.person) and \
                value == (a.value if a.value != [] else None)
        if not ok:
            wrong.append(f"{a.who} {a.kind} {a.clip} p{a.person}: history has {rows[seqs[0]]}, answered {a.value}")
    return {"acknowledged": len(acks), "with_history_rows": with_rows, "history_rows": len(rows),
            "missing": len(missing), "wrong": len(wrong), "examples": (missing + wrong)[:5]}


def latencies(rec: ac.Recorder) -> dict:
    out = {}
    for kind in sorted({k for k, _, _ in rec.rows}, key=lambda k: (k not in ac.KINDS, ac.KINDS.index(k)
                                                                   if k in ac.KINDS else 0, k)):
        ok = np.array([s for k, s, st in rec.rows if k == kind and 200 <= st < 400]) * 1000
        errors = sum(1 for k, _, st in rec.rows if k == kind and not 200 <= st < 400)
        out[kind] = {"n": int(ok.size), "errors": errors,
                     **({f"p{q}": round(float(np.percentile(ok, q)), 1) for q in (50, 95, 99)} if ok.size else {})}
    return out


# ---------------------------------------------------------------- one run


def one_run(code: Path, folder: dict, args, index: int) -> dict:
    env = code_env(code)
    label = f"{code_rev(code)} ({code})"
    run = Path(args.work) / f"run-{index}-{time.strftime('%Y%m%dT%H%M%S')}"
    config = write_config(run, Path(folder["root"]), code, args.threads, args.annotators + 1)
    annotators = [f"ann{i:02d}" for i in range(1, args.annotators + 1)]
    t0 = time.perf_counter()
    for name in annotators:
        ac.add_account(sys.executable, env, str(run), str(config), name, "annotator")
    ac.add_account(sys.executable, env, str(run), str(config), "judge", "adjudicator")
    accounts_s = time.perf_counter() - t0
    serve = ["-m", "microg4m.cli", "team", "serve", "--configfile", str(config), "--port", "0"]
    if args.profile:
        serve = [str(PROFILER), str(run / "profile"), *serve[1:]]
    print(f"bench_annotate: {label}: starting the server over {folder['kept']} clips", flush=True)
    server = Server([sys.executable, *serve], env, run, run / "server.log", args.start_timeout)
    print(f"bench_annotate: up in {server.startup:.1f} s on port {server.port}; {args.annotators} annotators, "
          f"{args.actions} actions each", flush=True)

    from microg4m.formats.labels import read_label_map

    # the code's pages load a clip's frames in one request (GET /clip/<clip>/frames) or one per frame
    frames_in_one = "/frames`" in (code / "microg4m" / "annotate" / "static" / "page.js").read_text()
    plan = ac.Plan(actions=args.actions, think=args.think, frame_connections=args.frame_connections,
                   label_ids=[int(i) for i in read_label_map(code / "annotations" / "label_map.pbtxt")["id"]],
                   frames_in_one=frames_in_one)
    rec, acks, stop = ac.Recorder(), ac.Acks(), threading.Event()
    clients = [ac.Annotator(n, server.port, plan, rec, acks, stop, args.timeout) for n in annotators]
    clients.append(ac.Adjudicator("judge", server.port, plan, rec, acks, stop, args.timeout))
    killed = []

    def watch():  # --stop kill: SIGKILL when half the actions are done; --max-seconds: stop the clients
        end = time.monotonic() + args.max_seconds
        while not stop.wait(0.05):
            done = sum(c.done for c in clients if isinstance(c, ac.Annotator))
            if args.stop == "kill" and not killed and done >= args.actions * args.annotators // 2:
                server.kill()
                killed.append(time.perf_counter() - t_drive)
                stop.set()
            if time.monotonic() > end:
                print(f"bench_annotate: --max-seconds {args.max_seconds} reached; stopping the clients", flush=True)
                stop.set()

    t_drive = time.perf_counter()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    ac.run_all(clients, stop)
    drive_s = time.perf_counter() - t_drive
    stopped = {"signal": "SIGKILL", "after_s": round(killed[0], 1)} if killed else server.terminate()
    for c in clients:
        c.api.close()
    db = run / "annotations" / "team.sqlite"
    out = {"code": label, "run": str(run), "startup_s": round(server.startup, 1), "accounts_s": round(accounts_s, 1),
           "drive_s": round(drive_s, 1), "peak_rss_mib": round(server.peak / 2**20), "stop": stopped,
           "actions_done": {c.name: c.done for c in clients if isinstance(c, ac.Annotator)},
           "adjudication_rounds": clients[-1].rounds,
           "client_errors": sum(len(c.errors) for c in clients),
           "client_error_examples": [e for c in clients for e in c.errors][:5],
           "latency_ms": latencies(rec), "writes": verify(db, acks.items)}
    if args.profile:
        out["profile"] = str(run / "profile")
    return out


# ---------------------------------------------------------------- report


def cpu_line() -> str:
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return platform.processor()
    model = re.search(r"Model name:\s*(.+)", info)
    flags = set((re.search(r"Flags:\s*(.+)", info) or re.search("", "")).group(0).split())
    have = [f for f in ("avx2", "fma", "vaes", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    return f"{model.group(1).strip() if model else '?'}, {os.cpu_count()} cores, {', '.join(have)}"


def _cell(x: dict | None) -> str:
    if not x:
        return "-"
    if not x["n"]:
        return f"0 answered ({x['errors']})"
    return f"{x['n']} / {x['p50']:g} / {x['p95']:g} / {x['p99']:g}" + (f" ({x['errors']})" if x["errors"] else "")


def _writes(w: dict) -> str:
    lost = w["missing"] + w["wrong"]
    return (f"{w['acknowledged']} / {w['with_history_rows'] - lost} (+{w['acknowledged'] - w['with_history_rows']} "
            f"unchanged) / {lost}")


def _stop(s: dict) -> str:
    return f"SIGKILL after {s['after_s']} s" if s.get("signal") else f"SIGTERM: exit {s['rc']} in {s['seconds']} s"


def markdown(result: dict) -> str:
    lines = [f"bench_annotate.py: {result['folder']['kept']} clips in {result['folder']['units']} units, "
             f"{result['args']['annotators']} annotators + 1 adjudicator, {result['args']['actions']} actions each, "
             f"think {result['args']['think']} s; {result['cpu']}; load before {result['load_before']}", ""]
    runs = [r for r in result["runs"] if "failed" not in r]
    if runs:
        lines.append("| request | " + " | ".join(f"{r['code']} n / p50 / p95 / p99 ms (errors)" for r in runs) + " |")
        lines.append("|---|" + "---|" * len(runs))
        for k in dict.fromkeys(k for r in runs for k in r["latency_ms"]):
            lines.append(f"| {k} | " + " | ".join(_cell(r["latency_ms"].get(k)) for r in runs) + " |")
        for name, show in (("server start-up s", lambda r: r["startup_s"]),
                           ("server peak memory MiB", lambda r: r["peak_rss_mib"]),
                           ("session wall s", lambda r: r["drive_s"]),
                           ("writes acknowledged / in the history / missing", lambda r: _writes(r["writes"])),
                           ("stop", lambda r: _stop(r["stop"]))):
            lines.append(f"| {name} | " + " | ".join(str(show(r)) for r in runs) + " |")
    lines += [f"\n{r['code']}: {r['failed']}" for r in result["runs"] if "failed" in r]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", type=int, default=4759, help="kept clips (MicroG-4M: 4,759; ten times: 47590)")
    ap.add_argument("--units", type=int, default=None,
                    help="per-unit folders (default: 100 per 4,759 clips, as the paper's shape: 1,000 at 47,590)")
    ap.add_argument("--sources-per-unit", type=int, default=1,
                    help="sources per unit (1: each unit is a source, as sources_per_job 1 or auto on a cluster)")
    ap.add_argument("--jpeg-frames", action="store_true", help="give every clip the export's JPEG frames")
    ap.add_argument("--annotators", type=int, default=9)
    ap.add_argument("--actions", type=int, default=100, help="requests per annotator, frames not counted")
    ap.add_argument("--think", type=float, default=0.5, help="mean seconds between an annotator's requests")
    ap.add_argument("--frame-connections", type=int, default=6, help="connections per annotator for frames")
    ap.add_argument("--threads", type=int, default=8, help="the server's threads (team.server.threads)")
    ap.add_argument("--code", action="append", default=[], help="a microg4m checkout to serve (repeat to compare; "
                                                                 "default: this one)")
    ap.add_argument("--stop", choices=["term", "kill"], default="term",
                    help="term: SIGTERM at the end; kill: SIGKILL when half the actions are done")
    ap.add_argument("--profile", action="store_true",
                    help="profile every request in the server (cProfile per request kind, into the run folder)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds a client waits for an answer")
    ap.add_argument("--max-seconds", type=float, default=3600, help="stop the clients after this long")
    ap.add_argument("--start-timeout", type=float, default=1800, help="seconds the server may take to start")
    ap.add_argument("--work", default=str(REPO / "bench" / "out" / "annotate"), help="folders and runs")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "bench_annotate"), help="report (.md, .json)")
    args = ap.parse_args(argv)
    if args.units is None:
        args.units = max(1, round(args.clips * 100 / 4759))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped bench stops its server too (atexit)
    codes = [Path(c).resolve() for c in (args.code or [str(REPO)])]
    args.work = str(Path(args.work).resolve())  # the server runs in its run folder: every path absolute
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    folder = annotate_folder.build(work / f"results-{args.clips}-{args.units}x{args.sources_per_unit}"
                                   f"{'-jpeg' if args.jpeg_frames else ''}", args.clips, args.units,
                                   args.sources_per_unit, work, args.jpeg_frames)
    print(f"bench_annotate: results folder {folder['root']} ({folder['kept']} kept clips, {folder['persons']} persons, "
          f"{folder['units']} units) ready in {time.perf_counter() - t0:.0f} s", flush=True)
    result = {"args": vars(args), "folder": folder, "cpu": cpu_line(),
              "load_before": " ".join(f"{x:.1f}" for x in os.getloadavg()), "runs": []}
    for i, code in enumerate(codes):
        try:
            result["runs"].append(one_run(code, folder, args, i))
        except RuntimeError as exc:  # e.g. a server that did not start in time: the next code still runs
            result["runs"].append({"code": f"{code_rev(code)} ({code})", "failed": str(exc)})
        result["load_after"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(markdown(result), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps(result, indent=1, default=str))
    Path(args.out + ".md").write_text(markdown(result))
    lost = sum(r["writes"]["missing"] + r["writes"]["wrong"] for r in result["runs"] if "writes" in r)
    return 1 if lost or any("failed" in r for r in result["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
