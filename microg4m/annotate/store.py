"""The two files the page writes: the actions CSV and the screening file.

State lives on disk only: every change re-reads the file under an exclusive lock on its
folder (``flock``; other tabs, threads and ``annotate`` processes wait), changes it and
writes it back atomically. A refused change raises :class:`Refused` and writes nothing.
What the page reads (:meth:`Store.actions`, :meth:`Store.excluded`) is read again only when
the file's stamp (time, size, inode) changed or this store wrote it, and is the same object
until then. (A write of this store does not rely on the stamp: two writes of the same size
within one tick of the file system's clock may give the new file the old one's stamp.)

* actions: the released schema ``video_id,movie_or_real,person_id,action``; rows of
  other clips and the order of existing rows are kept; a new row goes after the last
  row of the same person (or clip), else at the end.
* screening: one clip id per line as :func:`microg4m.formats.decisions.read_screening` reads it;
  the reason is a trailing ``# reason`` comment; other lines and comments are kept.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import os
import re
import threading
from pathlib import Path

from microg4m.common.atomic import write_text
from microg4m.common.text import TextError, check_text
from microg4m.formats.labels import MAX_ACTIONS
from microg4m.formats.labels import ACTIONS_COLUMNS, LabelError, read_actions
from .errors import Refused
from .results import Results

SCREENING_HEADER = "# Clips excluded by hand (one id per line; '# reason' after it). Read by the filter stage.\n"
MAX_REASON = 200


def check_reason(reason, what: str = "reason", limit: int = MAX_REASON) -> str:
    """A reason (or note) as it goes into a file: a string on one line, at most ``limit``
    characters, that encodes to UTF-8 and holds no control character; Refused otherwise."""
    if not isinstance(reason, str):
        raise Refused(400, f"{what} must be a string, got {reason!r}")
    try:
        check_text(reason, what)
    except TextError as exc:
        raise Refused(422, str(exc)) from None
    reason = " ".join(reason.split())
    if len(reason) > limit:
        raise Refused(422, f"{what} is {len(reason)} characters long (at most {limit})")
    return reason


@contextlib.contextmanager
def folder_lock(path: Path):
    """Exclusive lock on the folder of ``path`` for a read-modify-write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def placed(rows: list[list[str]], clip_id: str, clip_type: str, pid: int, ids: list[int]):
    """``(the rows with the person's actions exactly ids, or None when its set is already
    that, the person's ids before)``: its rows replaced where the first of them was; a new
    person after the clip's last row, else at the end."""
    mine = [i for i, r in enumerate(rows) if r[0] == clip_id and r[2] == str(pid)]
    had = [int(rows[i][3]) for i in mine]
    if sorted(had) == sorted(ids):
        return None, had
    same_clip = [i for i, r in enumerate(rows) if r[0] == clip_id]
    at = mine[0] if mine else (same_clip[-1] + 1 if same_clip else len(rows))
    others = [r for i, r in enumerate(rows) if i not in set(mine)]
    at -= sum(i < at for i in mine)
    others[at:at] = [[clip_id, clip_type, str(pid), str(a)] for a in ids]
    return others, had


class Store:
    def __init__(self, results: Results, actions: str | os.PathLike, screening: str | os.PathLike,
                 label_ids: set[int]):
        self.results = results
        self.actions_path = Path(actions)
        self.screening_path = Path(screening)
        self.label_ids = set(label_ids)
        self._lock = threading.Lock()
        self._read: dict[Path, tuple] = {}  # path -> (stamp, what was read)
        self._writes = 0  # goes up with every write of this store: a read begun before it is not kept
        self.read_rows()  # a broken file stops the page at start, not at the first click
        self.excluded()

    def _by_stamp(self, path: Path, read):
        """``read()``, or what it gave last while ``path``'s stamp is the same and this store
        did not write it."""
        with self._lock:
            writes = self._writes
        try:
            st = path.stat()
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        with self._lock:
            got = self._read.get(path)
            if got is not None and got[0] == stamp:
                return got[1]
        value = read()
        with self._lock:
            if writes == self._writes:
                self._read[path] = (stamp, value)
        return value

    def _write(self, path: Path, text: str) -> None:
        """Write ``path`` atomically and forget what was read of it."""
        write_text(path, text)
        with self._lock:
            self._writes += 1
            self._read.pop(path, None)

    # ------------------------------------------------------------ actions
    def read_rows(self) -> list[list[str]]:
        """Rows ``[video_id, movie_or_real, person_id, action]`` as strings, checked."""
        if not self.actions_path.is_file():
            return []
        try:
            df = read_actions(self.actions_path)
        except LabelError as exc:
            raise Refused(500, f"{exc}; fix the file by hand") from None
        rows = []
        for r in df.itertuples(index=False):
            if r.fields != len(ACTIONS_COLUMNS) or not r.person_id.isdigit() or not re.fullmatch(r"\d+", r.action):
                raise Refused(500, f"{self.actions_path}:{r.line}: bad row {r.raw!r} (expected "
                                   f"{','.join(ACTIONS_COLUMNS)} with integer person and action); fix it by hand")
            rows.append([r.video_id, r.movie_or_real, str(int(r.person_id)), str(int(r.action))])
        return rows

    def actions(self, clip_id: str | None = None) -> dict[tuple[str, int], list[int]]:
        """``(clip, person) -> [action ids]`` in file order, without repeats (all clips: the
        same object while the file is unchanged; do not change it)."""
        every = self._by_stamp(self.actions_path, self._read_actions)
        return every if clip_id is None else {k: list(v) for k, v in every.items() if k[0] == clip_id}

    def _read_actions(self) -> dict[tuple[str, int], list[int]]:
        out: dict[tuple[str, int], list[int]] = {}
        for vid, _, pid, aid in self.read_rows():
            ids = out.setdefault((vid, int(pid)), [])
            if int(aid) not in ids:
                ids.append(int(aid))
        return out

    def _check_person(self, clip_id: str, person_id) -> tuple:
        clip = self.results.clip(clip_id)
        if isinstance(person_id, bool) or not isinstance(person_id, int):
            raise Refused(400, f"person_id must be an integer, got {person_id!r}")
        if person_id not in self.results.persons(clip_id):
            raise Refused(404, f"person {person_id} has no box in clip {clip_id}")
        return clip, person_id

    def _check_action(self, action) -> int:
        if isinstance(action, bool) or not isinstance(action, int):
            raise Refused(400, f"action must be an integer id, got {action!r}")
        if action not in self.label_ids:
            raise Refused(422, f"unknown action id {action} (not in the label map)")
        return action

    def add(self, clip_id: str, person_id, action) -> list[int]:
        """Give the person one more action; returns the person's actions."""
        clip, pid = self._check_person(clip_id, person_id)
        aid = self._check_action(action)
        with folder_lock(self.actions_path):
            if clip_id in self._read_excluded():  # exact, under the lock
                raise Refused(409, f"clip {clip_id} is excluded; include it again before labelling")
            rows = self.read_rows()
            mine = [int(r[3]) for r in rows if r[0] == clip_id and r[2] == str(pid)]
            if aid in mine:
                return list(dict.fromkeys(mine))
            if len(set(mine)) >= MAX_ACTIONS:
                raise Refused(409, f"person {pid} in {clip_id} already has {MAX_ACTIONS} actions "
                                   f"(the most allowed); remove one first")
            same_person = [i for i, r in enumerate(rows) if r[0] == clip_id and r[2] == str(pid)]
            same_clip = [i for i, r in enumerate(rows) if r[0] == clip_id]
            at = (same_person or same_clip or [len(rows) - 1])[-1] + 1
            rows.insert(at, [clip_id, clip.clip_type, str(pid), str(aid)])
            self._write_rows(rows)
            return list(dict.fromkeys(mine + [aid]))

    def replace(self, clip_id: str, person_id, actions) -> list[int]:
        """Make the person's actions exactly ``actions`` (ids of the label map, at most
        MAX_ACTIONS) in one save: a suggestion saved as the page shows it. The person's rows
        are replaced where the first of them was; returns the person's actions."""
        clip, pid = self._check_person(clip_id, person_id)
        if not isinstance(actions, list):
            raise Refused(400, f"actions must be a list of action ids, got {actions!r}")
        ids = list(dict.fromkeys(self._check_action(a) for a in actions))
        if len(ids) > MAX_ACTIONS:
            raise Refused(409, f"{len(ids)} actions for person {pid} in {clip_id} (at most {MAX_ACTIONS})")
        with folder_lock(self.actions_path):
            if ids and clip_id in self.excluded():
                raise Refused(409, f"clip {clip_id} is excluded; include it again before labelling")
            rows = self.read_rows()
            new, had = placed(rows, clip_id, clip.clip_type, pid, ids)
            if new is None:  # the same set (labels have no order): nothing to write
                return had
            self._write_rows(new)
            return ids

    def replace_many(self, sets: dict[tuple[str, int], list[int]], clip_types: dict[str, str]) -> dict:
        """Make each ``(clip, person)``'s actions exactly the ids given (checked by the caller:
        ids of the label map, at most MAX_ACTIONS, persons of the clips), in one pass and one
        write under the lock: a person's rows are replaced where the first of them was, a new
        person's rows go after its clip's last row (in the order given), else at the end. A
        clip excluded by hand is left as it is. Returns ``{"changed": n, "unchanged": n,
        "excluded": [(clip, person), ...]}``."""
        out = {"changed": 0, "unchanged": 0, "excluded": []}
        with folder_lock(self.actions_path):
            excluded = self._read_excluded()
            rows = self.read_rows()
            mine: dict[tuple[str, int], list[int]] = {}
            last_of_clip: dict[str, int] = {}
            for i, r in enumerate(rows):
                mine.setdefault((r[0], int(r[2])), []).append(i)
                last_of_clip[r[0]] = i
            first_new: dict[int, list] = {}  # row index -> the new rows that take its place
            after: dict[int, list] = {}  # row index -> the new persons' rows that follow it
            at_end: list = []
            drop: set[int] = set()
            for (clip_id, pid), ids in sets.items():
                if ids and clip_id in excluded:
                    out["excluded"].append((clip_id, pid))
                    continue
                had = [int(rows[i][3]) for i in mine.get((clip_id, pid), [])]
                if sorted(had) == sorted(ids):
                    out["unchanged"] += 1
                    continue
                out["changed"] += 1
                new = [[clip_id, clip_types[clip_id], str(pid), str(a)] for a in ids]
                old = mine.get((clip_id, pid))
                if old:
                    drop.update(old)
                    first_new[old[0]] = new
                elif clip_id in last_of_clip:
                    after.setdefault(last_of_clip[clip_id], []).extend(new)
                else:
                    at_end.extend(new)
            if out["changed"]:
                result = []
                for i, r in enumerate(rows):
                    result += first_new.get(i, [])
                    if i not in drop:
                        result.append(r)
                    result += after.get(i, [])
                self._write_rows(result + at_end)
        return out

    def remove(self, clip_id: str, person_id, action) -> list[int]:
        """Take an action from the person (every row of it); returns the person's actions.

        Any integer is accepted, so that an id typed by hand outside the label map can go.
        """
        _, pid = self._check_person(clip_id, person_id)
        if isinstance(action, bool) or not isinstance(action, int):
            raise Refused(400, f"action must be an integer id, got {action!r}")
        aid = action
        with folder_lock(self.actions_path):
            rows = self.read_rows()
            keep = [r for r in rows if not (r[0] == clip_id and r[2] == str(pid) and r[3] == str(aid))]
            if len(keep) != len(rows):
                self._write_rows(keep)
            return list(dict.fromkeys(int(r[3]) for r in keep if r[0] == clip_id and r[2] == str(pid)))

    def _write_rows(self, rows: list[list[str]]) -> None:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(ACTIONS_COLUMNS)
        w.writerows(rows)
        self._write(self.actions_path, buf.getvalue())

    # ------------------------------------------------------------ screening
    def _screening_lines(self) -> list[str]:
        if not self.screening_path.is_file():
            return []
        try:
            return self.screening_path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise Refused(500, f"{self.screening_path}: cannot read ({exc})") from None

    @staticmethod
    def _split(line: str) -> tuple[str, str]:
        """``(clip id, reason)`` of a screening line, as the filter reads the id."""
        body, _, comment = line.partition("#")
        return body.strip(), comment.strip()

    def excluded(self) -> dict[str, str]:
        """Excluded clip id -> reason ('' when none); the same object while the file is unchanged."""
        return self._by_stamp(self.screening_path, self._read_excluded)

    def _read_excluded(self) -> dict[str, str]:
        out = {}
        for line in self._screening_lines():
            cid, why = self._split(line)
            if cid:
                out.setdefault(cid, why)
        return out

    def set_excluded(self, clip_id: str, excluded, reason="") -> dict:
        """Exclude a clip (with a reason) or include it again."""
        self.results.clip(clip_id)
        if not isinstance(excluded, bool):
            raise Refused(400, f"excluded must be true or false, got {excluded!r}")
        reason = check_reason(reason)
        with folder_lock(self.screening_path):
            lines = self._screening_lines()
            others = [ln for ln in lines if self._split(ln)[0] != clip_id]
            if excluded:
                mine = f"{clip_id}  # {reason}" if reason else clip_id
                at = next((i for i, ln in enumerate(lines) if self._split(ln)[0] == clip_id), None)
                if at is None:
                    new = (others or [SCREENING_HEADER.rstrip("\n")]) + [mine]
                else:  # replace in place (first occurrence), drop repeats
                    before = [ln for ln in lines[:at] if self._split(ln)[0] != clip_id]
                    new = before + [mine] + [ln for ln in lines[at + 1:] if self._split(ln)[0] != clip_id]
            else:
                new = others
            if new != lines:
                self._write(self.screening_path, "".join(f"{ln}\n" for ln in new))
        return {"clip_id": clip_id, "excluded": excluded, "reason": reason if excluded else ""}
