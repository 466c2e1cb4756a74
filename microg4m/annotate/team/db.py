"""The team database: SQLite in WAL mode, every commit synced to disk before it returns.

``synchronous=FULL`` makes a committed transaction survive a kill of the process and a
power loss, so a change the server has acknowledged (it answers after COMMIT) is never
lost. Writers take the write lock at the start (``BEGIN IMMEDIATE``) and wait for each
other (``busy_timeout``); readers never block them (WAL).

The file holds the password hashes: it is created readable and writable by its owner
only (0600), and SQLite gives its write-ahead log and shared-memory files (``-wal``,
``-shm``) the database file's permissions; backups (:func:`create_private`) too.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

BUSY_MS = 30_000
SCHEMA_VERSION = "3"  # 2: the kinds of the captions and QA pairs (vqa_review.py); 3: suggestion outcomes
FINAL = "@final"  # the layer of the final labels (annotator names cannot contain '@')
AUTO = "@auto"  # who: the server, when all annotators of a clip agree
IMPORT = "@import"  # who: labels found in the workflow's files when team mode started
REPAIR = "@repair"  # who: microg4m team rebuild, mending text no file can take (history.repair)

CHANGES = """
-- The history: one row per change of one value, never updated or deleted.
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,                  -- UTC, ISO 8601 with microseconds
    who TEXT NOT NULL,                 -- a user, @auto or @import
    layer TEXT NOT NULL,               -- an annotator's name, or @final
    kind TEXT NOT NULL CHECK (kind IN ('actions', 'exclusion', 'note', 'resolved',
                                       'text', 'text_note', 'text_resolved')),
    clip_id TEXT NOT NULL,
    clip_type TEXT NOT NULL,
    person_id INTEGER NOT NULL,        -- 0 for the values of a whole clip
    before TEXT,                       -- JSON, NULL = no value
    after TEXT,                        -- JSON, NULL = no value
    suggested TEXT,                    -- JSON {model, prompt_hash, actions}: the suggestion the person had
    outcome TEXT CHECK (outcome IN ('accepted', 'edited', 'removed'))  -- what this save made of it
);
CREATE INDEX IF NOT EXISTS changes_clip ON changes (layer, clip_id, seq);
CREATE TRIGGER IF NOT EXISTS changes_append_only_u BEFORE UPDATE ON changes
    BEGIN SELECT RAISE(ABORT, 'the history is append-only'); END;
CREATE TRIGGER IF NOT EXISTS changes_append_only_d BEFORE DELETE ON changes
    BEGIN SELECT RAISE(ABORT, 'the history is append-only'); END;
"""

SCHEMA = CHANGES + """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role IN ('annotator', 'adjudicator')),
    password TEXT NOT NULL,            -- werkzeug scrypt hash (salted); never the password
    active INTEGER NOT NULL DEFAULT 1,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    token_hash TEXT PRIMARY KEY,       -- sha256 of the cookie value; the value itself is not stored
    name TEXT NOT NULL REFERENCES users (name),
    csrf TEXT NOT NULL,
    created TEXT NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS login_failures (   -- login throttling (throttle.py)
    key TEXT PRIMARY KEY,              -- account:NAME or address:ADDR
    failures INTEGER NOT NULL,         -- attempts counted since 'since'
    since REAL NOT NULL,
    locked_until REAL NOT NULL         -- 0: not locked
);
CREATE TABLE IF NOT EXISTS assignments (
    clip_id TEXT NOT NULL,
    annotator TEXT NOT NULL REFERENCES users (name),
    at TEXT NOT NULL,
    PRIMARY KEY (clip_id, annotator)
);
CREATE INDEX IF NOT EXISTS assignments_annotator ON assignments (annotator, clip_id);  -- a queue
-- The latest value of every key: what replaying the history gives (kept in the same
-- transaction as the change, so that reads need no replay).
CREATE TABLE IF NOT EXISTS current (
    layer TEXT NOT NULL,
    kind TEXT NOT NULL,
    clip_id TEXT NOT NULL,
    person_id INTEGER NOT NULL,
    clip_type TEXT NOT NULL,
    value TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (layer, kind, clip_id, person_id)
);
-- a clip's values in every layer (a change settles its clip; the pages read one clip)
CREATE INDEX IF NOT EXISTS current_clip ON current (clip_id);
"""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


PRIVATE = 0o600


def create_private(path: str | os.PathLike) -> bool:
    """Create ``path`` empty with mode 0600 unless it exists; whether it created it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    except FileExistsError:
        return False
    os.close(fd)
    os.chmod(path, PRIVATE)  # whatever the umask
    return True


def readable_by_others(path: str | os.PathLike) -> list[str]:
    """The database's files (the file, -wal, -shm) that other accounts may read or write."""
    out = []
    for p in (Path(path), Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            if p.stat().st_mode & 0o077:
                out.append(f"{p} (mode {p.stat().st_mode & 0o777:04o})")
        except FileNotFoundError:
            pass
    return out


def connect(path: str | os.PathLike, create: bool = True, setup: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit, see :func:`transaction`).

    ``setup``: create the tables if needed and check the schema version (once per
    process is enough; the server's per-request connections skip it).
    """
    path = Path(path)
    if not create and not path.is_file():
        raise ValueError(f"team database {path} not found (add a user first: microg4m team user add NAME)")
    path.parent.mkdir(parents=True, exist_ok=True)
    create_private(path)  # 0600 before SQLite opens it (its -wal and -shm follow the file's mode)
    conn = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None, check_same_thread=False)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        if mode.lower() != "wal":
            raise ValueError(f"{path}: SQLite cannot use WAL mode here (journal_mode {mode}); "
                             f"put the database on a local disk")
        if setup:
            conn.executescript(SCHEMA)  # idempotent (IF NOT EXISTS)
            with transaction(conn):
                got = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if got is None:
                    conn.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
                elif got[0] == "1":
                    _migrate_1(conn)
                elif got[0] == "2":
                    _migrate_2_to_3(conn)
                elif got[0] != SCHEMA_VERSION:
                    raise ValueError(f"{path}: team database schema {got[0]}, this microg4m reads "
                                     f"{SCHEMA_VERSION}")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise ValueError(f"{path}: not a usable team database ({exc})") from None
    except BaseException:
        conn.close()
        raise
    return conn


V1_COLUMNS = "seq, at, who, layer, kind, clip_id, clip_type, person_id, before, after"


def _migrate_1(conn: sqlite3.Connection) -> None:
    """Schema 1 -> today's (in the caller's transaction): the history table again with the
    new kinds in its CHECK (SQLite cannot change a CHECK in place) and the suggestion
    columns; every row is kept as it was (no suggestion)."""
    conn.execute("DROP TRIGGER changes_append_only_u")
    conn.execute("DROP TRIGGER changes_append_only_d")
    conn.execute("ALTER TABLE changes RENAME TO changes_v1")
    conn.execute("DROP INDEX IF EXISTS changes_clip")
    statement = ""
    for line in CHANGES.splitlines(keepends=True):  # executescript would commit the transaction
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    conn.execute(f"INSERT INTO changes ({V1_COLUMNS}) SELECT {V1_COLUMNS} FROM changes_v1")
    conn.execute("DROP TABLE changes_v1")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA_VERSION,))


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Schema 2 -> 3 (in the caller's transaction): the history's two suggestion columns,
    NULL in every row there is (a row is never changed otherwise)."""
    conn.execute("ALTER TABLE changes ADD COLUMN suggested TEXT")
    conn.execute("ALTER TABLE changes ADD COLUMN outcome TEXT CHECK (outcome IN ('accepted', 'edited', 'removed'))")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA_VERSION,))


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection):
    """One write transaction: the write lock from the start, COMMIT (synced) or ROLLBACK."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (key, value))
