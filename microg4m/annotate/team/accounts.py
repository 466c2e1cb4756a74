"""Accounts (name, role, salted password hash) and server-side login sessions.

Passwords are hashed with werkzeug's scrypt (random salt per hash); only the hash is
stored. A new password must be long enough and hard to guess (:class:`PasswordRules`,
config ``team.passwords``): zxcvbn, which knows the common passwords, words, names,
keyboard patterns and repeats, scores it. A session is a random token in the browser's
cookie; the database keeps its SHA-256 and the session's CSRF token, so a copy of the
database opens no session. Disabling an account or changing its password ends its
sessions.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from werkzeug.security import check_password_hash, generate_password_hash

from microg4m.common.text import TextError, check_text
from ..options import ANNOTATOR
from .db import now, transaction

ROLES = ("annotator", "adjudicator")
# checked against when the name is unknown, so that a wrong name costs as long as a wrong password
_DUMMY_HASH = generate_password_hash("not a password of anyone")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not ANNOTATOR.fullmatch(name):
        raise ValueError(f"user name {name!r}: use 1-40 letters, digits, '_' or '-'")
    return name


@dataclass(frozen=True)
class PasswordRules:
    """Config ``team.passwords`` (the defaults are the schema's)."""

    min_length: int = 12
    min_strength: int = 3  # zxcvbn's score, 0 (a top-10 password) to 4

    def check(self) -> "PasswordRules":
        from microg4m import config

        config.validate_section("team.passwords", {"min_length": self.min_length, "min_strength": self.min_strength})
        return self


def check_password(password, name: str = "", rules: PasswordRules = PasswordRules()) -> str:
    """``password`` if it keeps the rules; ValueError saying why not (never echoing it)."""
    if not isinstance(password, str):
        raise ValueError("the password must be text")
    try:
        check_text(password, "the password")
    except TextError as exc:
        raise ValueError(str(exc)) from None
    if len(password) < rules.min_length:
        raise ValueError(f"password too short ({len(password)} characters; at least {rules.min_length})")
    if rules.min_strength:
        from zxcvbn import zxcvbn

        # the score of the first 72 characters (zxcvbn's limit) is a lower bound of the whole's
        got = zxcvbn(password[:72], user_inputs=[name, "microg4m", "annotate", "annotator", "adjudicator"])
        if got["score"] < rules.min_strength:
            hint = got["feedback"]["warning"] or " ".join(got["feedback"]["suggestions"]) or "it is easy to guess"
            raise ValueError(f"password too easy to guess (strength {got['score']} of 4, at least "
                             f"{rules.min_strength}): {hint}")
    return password


def add_user(conn: sqlite3.Connection, name: str, role: str, password: str,
             rules: PasswordRules = PasswordRules()) -> None:
    check_name(name)
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    hashed = generate_password_hash(check_password(password, name, rules))
    with transaction(conn):
        if conn.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
            raise ValueError(f"user {name} exists already (change the password with: user passwd {name})")
        conn.execute("INSERT INTO users (name, role, password, active, created) VALUES (?, ?, ?, 1, ?)",
                     (name, role, hashed, now()))


def _existing(conn: sqlite3.Connection, name: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise ValueError(f"no user {name!r}")
    return row


def set_password(conn: sqlite3.Connection, name: str, password: str,
                 rules: PasswordRules = PasswordRules()) -> None:
    _existing(conn, name)
    hashed = generate_password_hash(check_password(password, name, rules))
    with transaction(conn):
        _existing(conn, name)
        conn.execute("UPDATE users SET password = ? WHERE name = ?", (hashed, name))
        conn.execute("DELETE FROM sessions WHERE name = ?", (name,))


def set_active(conn: sqlite3.Connection, name: str, active: bool) -> None:
    with transaction(conn):
        _existing(conn, name)
        conn.execute("UPDATE users SET active = ? WHERE name = ?", (int(active), name))
        if not active:
            conn.execute("DELETE FROM sessions WHERE name = ?", (name,))


def users(conn: sqlite3.Connection) -> list[dict]:
    return [dict(name=r["name"], role=r["role"], active=bool(r["active"]), created=r["created"])
            for r in conn.execute("SELECT * FROM users ORDER BY name")]


def annotators(conn: sqlite3.Connection) -> list[str]:
    """Active annotators, by name."""
    return [r[0] for r in conn.execute(
        "SELECT name FROM users WHERE role = 'annotator' AND active = 1 ORDER BY name")]


def verify(conn: sqlite3.Connection, name: str, password: str) -> sqlite3.Row | None:
    """The user row if the name is an active account with this password, else None."""
    row = conn.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone() if isinstance(name, str) else None
    ok = check_password_hash(row["password"] if row else _DUMMY_HASH, password if isinstance(password, str) else "")
    return row if ok and row is not None and row["active"] else None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def open_session(conn: sqlite3.Connection, name: str, hours: float) -> str:
    """A new session for ``name``; returns the cookie value."""
    token = secrets.token_urlsafe(32)
    with transaction(conn):
        conn.execute("DELETE FROM sessions WHERE expires < ?", (time.time(),))
        conn.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
                     (_digest(token), name, secrets.token_urlsafe(32), now(), time.time() + hours * 3600))
    return token


def session(conn: sqlite3.Connection, token: str | None) -> dict | None:
    """``{name, role, csrf}`` of a live session of an active user, else None."""
    if not token:
        return None
    row = conn.execute(
        "SELECT s.name, s.csrf, s.expires, u.role, u.active FROM sessions s JOIN users u ON u.name = s.name "
        "WHERE s.token_hash = ?", (_digest(token),)).fetchone()
    if row is None or not row["active"] or row["expires"] < time.time():
        return None
    return {"name": row["name"], "role": row["role"], "csrf": row["csrf"]}


def close_session(conn: sqlite3.Connection, token: str | None) -> None:
    if token:
        with transaction(conn):
            conn.execute("DELETE FROM sessions WHERE token_hash = ?", (_digest(token),))


def same_token(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(a.encode(), b.encode())


class LoginForms:
    """The login forms' tokens, kept server-side (in this process): a token posted back must
    be one this server handed out less than ``max_age`` seconds ago, and is good once. So a
    page elsewhere cannot make up a form (login CSRF) even where it can set the login
    cookie (cookies are not kept apart by port). At most ``limit`` are kept (oldest first out)."""

    def __init__(self, max_age: float = 3600, limit: int = 10_000):
        self.max_age, self.limit = max_age, limit
        self._lock = threading.Lock()
        self._tokens: OrderedDict[str, float] = OrderedDict()  # sha256 -> expiry

    def issue(self) -> str:
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._tokens[_digest(token)] = time.monotonic() + self.max_age
            while len(self._tokens) > self.limit:
                self._tokens.popitem(last=False)
        return token

    def take(self, token) -> bool:
        """Whether ``token`` is a live one (it is used up either way)."""
        if not isinstance(token, str):
            return False
        with self._lock:
            expiry = self._tokens.pop(_digest(token), None)
        return expiry is not None and expiry > time.monotonic()
