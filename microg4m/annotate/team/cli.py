"""``microg4m team COMMAND`` (see options.py for the options, docs/team.md)."""

from __future__ import annotations

import argparse
import csv
import gc
import getpass
import ipaddress
import logging
import sqlite3
import sys
from datetime import datetime, timezone

from . import accounts, throttle
from .db import connect, create_private, readable_by_others
from .history import HistoryError
from .options import Settings, settings


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        line = sys.stdin.readline()
        if not line:
            raise ValueError("--password-stdin: no line on stdin")
        return line.rstrip("\r\n")
    first = getpass.getpass(f"password for {args.name}: ")
    if getpass.getpass("again: ") != first:
        raise ValueError("the two passwords differ")
    return first


def _locked(until: float) -> str:
    return "locked until " + datetime.fromtimestamp(until, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _user(args: argparse.Namespace, s: Settings):
    conn = connect(s.database, create=args.action == "add")
    rules = accounts.PasswordRules(**(s.passwords or {})).check()
    try:
        if args.action == "list":
            locks = throttle.locks(conn)
            lines = [f"{u['name']}\t{u['role']}\t{'active' if u['active'] else 'disabled'}\t{u['created']}"
                     + (f"\t{_locked(locks[k])}" if (k := throttle.account_key(u['name'])) in locks else "")
                     for u in accounts.users(conn)]
            lines += [f"{k}\t\t\t\t{_locked(t)}" for k, t in locks.items() if k.startswith("address:")]
            return "\n".join(lines)
        if not args.name:
            raise ValueError(f"user {args.action}: give the user name")
        if args.action == "unlock":
            key = args.name if args.name.startswith("address:") else throttle.account_key(args.name)
            return f"unlocked {key}" if throttle.unlock(conn, key) else f"{key} was not locked"
        if args.action == "add":
            accounts.add_user(conn, args.name, args.role, _password(args), rules)
            return f"added {args.role} {args.name}"
        if args.action == "passwd":
            accounts.set_password(conn, args.name, _password(args), rules)
            return f"changed the password of {args.name} (their sessions are closed)"
        accounts.set_active(conn, args.name, args.action == "enable")
        return f"{args.action}d {args.name}"
    finally:
        conn.close()


def _backup(s: Settings, dest: str) -> dict:
    """SQLite's online backup: a consistent copy even while the server writes (mode 0600:
    it holds the password hashes)."""
    src = connect(s.database, create=False)
    if not create_private(dest):
        src.close()
        raise ValueError(f"{dest} exists; give a new file")
    try:
        out = sqlite3.connect(dest)
        try:
            src.backup(out)
        finally:
            out.close()
        return {"backup": dest, "changes": src.execute("SELECT COUNT(*) FROM changes").fetchone()[0]}
    finally:
        src.close()


def serve(project, args: argparse.Namespace, s: Settings) -> None:
    from ..guard import allowed_hosts
    from ..serving import Server, ServerSettings, run_until_signalled
    from .server import create_app

    server_settings = ServerSettings(**{k: v for k, v in (s.server or {}).items() if v is not None}).check()
    if not logging.getLogger().handlers:  # refused logins and locks go to stderr (the server's log)
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    conn = project.connect()
    try:
        started = project.start(conn)
        users = accounts.users(conn)
    finally:
        conn.close()
    if not any(u["active"] for u in users):
        print("warning: no active account yet; add one with: microg4m team user add NAME", file=sys.stderr)
    if lax := readable_by_others(s.database):
        print(f"warning: other accounts can read the team database (it holds the password hashes): "
              f"{', '.join(lax)}; chmod 600 them", file=sys.stderr)
    if started["files_error"]:
        print(f"warning: {started['files_error']}; serving, but until the files can be written every change "
              f"that would change the final labels is refused (503, nothing saved)", file=sys.stderr)
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if not loopback:
        print(f"warning: serving plain HTTP on {args.host}; browsers keep the Secure login cookie only over "
              f"HTTPS or on localhost: put a TLS reverse proxy in front (docs/team.md)", file=sys.stderr)
    app = create_app(project, allowed_hosts(args.host, args.allowed_host), args.session_hours or s.session_hours)
    # What the start made (the results index, every annotator's list) lives as long as the
    # server: kept out of the garbage collector's full passes (at 47,590 clips this lowered
    # the p50s a little; docs/benchmarks.md).
    gc.collect()
    gc.freeze()
    server = Server(app, args.host, args.port, server_settings)
    stop = run_until_signalled(server, ready=lambda: print(
        f"microg4m team: http://{args.host}:{server.port}/  database {s.database}, "
        f"{started['assigned']} clips newly assigned, {server_settings.threads} threads "
        f"(Ctrl-C or SIGTERM to stop)", flush=True))
    app.extensions["microg4m.team.close"]()
    done = project.finish()
    files = (f"files in step ({len(done['written'])} rewritten)" if not done["files_error"]
             else f"files NOT in step: {done['files_error']}")
    print(f"microg4m team: stopped cleanly: {stop['finished']} of {stop['in_flight']} requests in flight "
          f"finished ({stop['abandoned']} abandoned after {server_settings.shutdown_timeout:g} s), "
          f"database closed, {files}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace):
    """Run one team command; returns what to print (dict or text)."""
    s = settings(args)
    if args.team_command == "user":
        return _user(args, s)
    from .project import Project

    if args.team_command == "backup":
        return _backup(s, args.dest)
    project = Project(s, create=False)
    if args.team_command == "serve":
        return serve(project, args, s)
    conn = project.connect()
    try:
        if args.team_command == "assign":
            new = project.assign(conn)
            return {"assigned": len(new), "clips": new}
        if args.team_command == "status":
            fig = project.figures(conn)
            return {"summary": fig["summary"], "annotators": fig["annotators"][
                ["annotator", "done", "excluded", "labels", "differing", "exclusion_differs"]].to_dict("records"),
                "texts": project.text_figures(conn)["summary"]}
        if args.team_command == "report":
            return {"written": project.write_report(conn)}
        if args.team_command == "history":
            from .history import rows

            out = rows(conn, since=args.since, clip_id=args.clip, who=args.who)
            w = csv.writer(sys.stdout, delimiter="\t", lineterminator="\n")
            cols = ("seq", "at", "who", "layer", "kind", "clip_id", "person_id", "before", "after", "suggested",
                    "outcome")
            w.writerow(cols)
            w.writerows([r[k] for k in cols] for r in out)
            return None
        if args.team_command == "rebuild":
            out = project.rebuild(conn, check=args.check)
            if args.check and out["unwritable"]:
                raise ValueError(f"{len(out['unwritable'])} values in the database hold text no file can take "
                                 f"(first: {out['unwritable'][0]}); run: microg4m team rebuild (it mends them)")
            if args.check and out["differ"]:
                raise ValueError(f"differ from the history: {', '.join(out['differ'])} (run: microg4m team rebuild)")
            return out
    except HistoryError as exc:
        raise ValueError(str(exc)) from None
    finally:
        conn.close()
    raise AssertionError(args.team_command)


def main(argv: list[str] | None = None) -> int:
    import json

    from .options import add_arguments

    parser = argparse.ArgumentParser(prog="python -m microg4m.annotate.team",
                                     description="Team mode of the annotation page.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        result = run(args)
    except (ValueError, OSError) as exc:
        print(f"microg4m team: error: {exc}", file=sys.stderr)
        return 1
    if result is not None:
        print(json.dumps(result, indent=2, default=str) if isinstance(result, dict) else result)
    return 0
