"""Login throttling: failed logins lock an account, or a client address, for a while.

Each login attempt is counted *before* its password is checked (:func:`begin`), under the
database's write lock, for two keys: the account (``account:NAME``) and the client
address (``address:ADDR``). The ``n``-th attempt within ``window_seconds`` arms a lock of
``lock_seconds``; a later attempt on a locked key is refused without checking any
password (so a flood costs no password hashing). A login that succeeds
(:func:`succeeded`) clears its account's count and takes itself off its address's
count, disarming a lock it armed. So, with ``n`` failures allowed, concurrent guesses at
one account get at most ``n`` password checks per window (and lock).

Locks are kept in the team database (table ``login_failures``), so that they hold
across restarts and ``microg4m team user list`` shows them (``user unlock NAME`` lifts
one). A name that is no account is counted like one (else a lock would tell which names
are accounts); no password is stored.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from .db import transaction


@dataclass(frozen=True)
class Limits:
    """Config ``team.login`` (the defaults are the schema's)."""

    account_failures: int = 5
    address_failures: int = 20
    window_seconds: float = 900
    lock_seconds: float = 900

    def check(self) -> "Limits":
        from microg4m import config

        config.validate_section("team.login", {k: getattr(self, k) for k in self.__dataclass_fields__})
        return self


@dataclass(frozen=True)
class Attempt:
    """What :func:`begin` decided: ``locked`` (the key and until when) or allowed, with the
    locks this attempt armed and the counts so far."""

    keys: tuple[str, ...]
    locked: tuple[str, float] | None = None
    armed: tuple[str, ...] = ()
    counts: tuple[tuple[str, int, int], ...] = ()  # (key, attempts in the window, limit)


def account_key(name: str) -> str:
    return f"account:{name}"


def address_key(addr: str) -> str:
    return f"address:{addr}"


def begin(conn: sqlite3.Connection, limits: Limits, account: str | None, address: str,
          now: float | None = None) -> Attempt:
    """Count one login attempt for the account name (None: not a valid name) and the address."""
    now = time.time() if now is None else now
    keys = ([(account_key(account), limits.account_failures)] if account else []) + \
        [(address_key(address), limits.address_failures)]
    for k, _ in keys:  # a locked key first without the write lock: a flood does not queue for it
        row = conn.execute("SELECT locked_until FROM login_failures WHERE key = ?", (k,)).fetchone()
        if row is not None and row[0] > now:
            return Attempt(tuple(k for k, _ in keys), locked=(k, row[0]))
    with transaction(conn):
        rows = {k: conn.execute("SELECT failures, since, locked_until FROM login_failures WHERE key = ?",
                                (k,)).fetchone() for k, _ in keys}
        for k, _ in keys:
            if rows[k] is not None and rows[k]["locked_until"] > now:
                return Attempt(tuple(k for k, _ in keys), locked=(k, rows[k]["locked_until"]))
        armed, counts = [], []
        for k, limit in keys:
            row = rows[k]
            stale = row is None or row["since"] < now - limits.window_seconds
            failures = 1 if stale else row["failures"] + 1
            since = now if stale else row["since"]
            locked_until = now + limits.lock_seconds if failures >= limit else 0.0
            if locked_until:
                armed.append(k)
                failures, since = 0, now  # counting starts again (after the lock)
            conn.execute("INSERT INTO login_failures (key, failures, since, locked_until) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT (key) DO UPDATE SET failures = excluded.failures, since = excluded.since, "
                         "locked_until = excluded.locked_until", (k, failures, since, locked_until))
            counts.append((k, limit if locked_until else failures, limit))
    return Attempt(tuple(k for k, _ in keys), armed=tuple(armed), counts=tuple(counts))


def succeeded(conn: sqlite3.Connection, attempt: Attempt) -> None:
    """The attempt's password was right: its account starts afresh, its address forgets it."""
    with transaction(conn):
        for k in attempt.keys:
            if k.startswith("account:"):
                conn.execute("DELETE FROM login_failures WHERE key = ?", (k,))
            elif k in attempt.armed:
                conn.execute("UPDATE login_failures SET locked_until = 0 WHERE key = ?", (k,))
            else:
                conn.execute("UPDATE login_failures SET failures = MAX(failures - 1, 0) WHERE key = ?", (k,))


def locks(conn: sqlite3.Connection, now: float | None = None) -> dict[str, float]:
    """Key -> until when, of the locks in force."""
    now = time.time() if now is None else now
    return {r[0]: r[1] for r in conn.execute(
        "SELECT key, locked_until FROM login_failures WHERE locked_until > ? ORDER BY key", (now,))}


def unlock(conn: sqlite3.Connection, key: str) -> bool:
    """Lift a lock (and forget the failures); whether there was anything to lift."""
    with transaction(conn):
        return conn.execute("DELETE FROM login_failures WHERE key = ?", (key,)).rowcount > 0
