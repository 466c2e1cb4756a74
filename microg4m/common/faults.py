"""Faults of the machine, told apart from faults of the input (docs/robustness.md).

A failure of the input (a truncated or non-video file, a source too short, a video that
is gone, a bot check) is data: its stage records it with the reason and the run goes on.
A failure of the machine is not: no space, a quota, a read-only or unwritable folder, an
I/O error, no memory, too many open files, a subprocess killed by a signal. It fails the
job with :class:`MachineFault`, naming the path and the errno, so that Snakemake keeps
nothing of the job and the next run does it again; it is never written into a status table.

This module is the one place that decides which is which, from

* an exception (:func:`errno_of`: an ``OSError`` with one of :data:`MACHINE_ERRNOS`,
  anywhere in the chain of causes, yt-dlp's ``exc_info`` included);
* a subprocess's exit status (:func:`signal_fault`: killed by SIGKILL, the kernel's
  out-of-memory killer, by SIGTERM, a job's time limit ...; a crash, SIGSEGV or SIGABRT, on
  a malformed input is the input's);
* the text of a message (:func:`errno_in_text`: ``[Errno 28]``, ffmpeg's ``error code -28``,
  ``No space left on device`` ...), which is also how a status table written before this
  module existed is read (:func:`recorded`: such a row is not final, the next run redoes its job).

``EPERM`` counts only as an ``OSError``: ffmpeg's generic error -1 prints as "Operation not
permitted" on broken inputs.
"""

from __future__ import annotations

import errno as _errno
import os
import re
import signal

# errno -> what the user does about it
MACHINE_ERRNOS: dict[int, str] = {
    _errno.ENOSPC: "free space on that filesystem",
    _errno.EDQUOT: "free space within your quota (or ask for a larger one)",
    _errno.EROFS: "give a writable folder (the filesystem is mounted read-only)",
    _errno.EIO: "check the disk or network filesystem (the kernel's log says more)",
    _errno.EACCES: "give this account read and write access to the folder",
    _errno.EPERM: "give this account access to the folder",
    _errno.ENOMEM: "give the job more memory (or fewer jobs at once)",
    _errno.EMFILE: "raise the limit of open files (ulimit -n)",
    _errno.ENFILE: "the system's open files are used up: fewer jobs at once",
    _errno.EFBIG: "the filesystem or ulimit -f caps the size of a file",
    _errno.ESTALE: "the network filesystem lost the file: run again",
}
# the texts of these errnos as messages print them (strerror), EPERM left out (module doc)
_PHRASES = {_errno.ENOSPC: ("no space left on device",), _errno.EDQUOT: ("disk quota exceeded",),
            _errno.EROFS: ("read-only file system",), _errno.EIO: ("input/output error",),
            _errno.EACCES: ("permission denied",), _errno.ENOMEM: ("cannot allocate memory", "out of memory"),
            _errno.EMFILE: ("too many open files",), _errno.ENFILE: ("too many open files in system",),
            _errno.EFBIG: ("file too large",), _errno.ESTALE: ("stale file handle", "stale nfs file handle")}
_TEXT_ERRNOS = sorted(_PHRASES)
_PYTHON_ERRNO = re.compile(r"\[errno (\d+)\]")  # Python's OSError text
_FFMPEG_ERRNO = re.compile(r"(?:error code:?|error number|return code) -(\d+)")  # ffmpeg's AVERROR(errno)
# Signals that kill a process from outside (the machine or the scheduler, not its input)
KILLED = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGBUS, signal.SIGXCPU,
          signal.SIGXFSZ, signal.SIGPIPE}
# old tables: "ffmpeg failed: exit code -9" (run_ffmpeg's message before this module)
_EXIT_SIGNAL = re.compile(r"exit code -(\d+)\b")


class MachineFault(Exception):
    """A fault of the machine, not of the input: the job fails and keeps nothing (module doc).

    ``path``: the file or folder concerned (or what was being done); ``errno``: the errno when
    there is one; ``signal``: the signal that killed a subprocess.
    """

    def __init__(self, path, detail: str, *, errno: int | None = None, signal: int | None = None):
        self.path, self.detail, self.errno, self.signal = str(path), detail, errno, signal
        super().__init__(self._message())

    def _message(self) -> str:
        if self.errno is not None:
            name = _errno.errorcode.get(self.errno, "?")
            what = f"errno {self.errno} {name}, {os.strerror(self.errno)}"
            todo = MACHINE_ERRNOS.get(self.errno, "fix the machine")
        else:
            what = f"killed by {signal.Signals(self.signal).name}" if self.signal else "a fault of the machine"
            todo = ("give the job more memory or time (SIGKILL is often the out-of-memory killer)"
                    if self.signal == signal.SIGKILL else "see why it was stopped")
        return (f"{self.path}: {self.detail} ({what}). A fault of the machine, not of the input: this job "
                f"keeps nothing; {todo}, then run the workflow again")


def errno_of(exc: BaseException | None) -> int | None:
    """The machine errno of ``exc`` or of what it wraps (``__cause__``, ``__context__``,
    yt-dlp's ``exc_info`` and ``cause``), else None. A MachineFault's own errno counts."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MachineFault):
            return exc.errno
        if isinstance(exc, OSError) and exc.errno in MACHINE_ERRNOS:
            return exc.errno
        info = getattr(exc, "exc_info", None)
        nxt = info[1] if isinstance(info, tuple) and len(info) > 1 else None
        cause = getattr(exc, "cause", None)
        exc = nxt or (cause if isinstance(cause, BaseException) else None) or exc.__cause__ or exc.__context__
    return None


def errno_in_text(text: str | None) -> int | None:
    """The machine errno a message names (``[Errno 28]``, ffmpeg's ``error code -28`` /
    ``return code -28``, or the errno's own words), else None. EPERM only by number."""
    low = (text or "").lower()
    for m in _PYTHON_ERRNO.finditer(low):
        if int(m.group(1)) in MACHINE_ERRNOS:
            return int(m.group(1))
    for m in _FFMPEG_ERRNO.finditer(low):
        if int(m.group(1)) in _PHRASES:
            return int(m.group(1))
    for number in _TEXT_ERRNOS:
        if any(p in low for p in _PHRASES[number]):
            return number
    return None


def signal_fault(returncode: int | None) -> int | None:
    """The signal that killed a subprocess from outside (:data:`KILLED`), from its exit
    status (Python's ``-N``, or a shell's ``128 + N``), else None."""
    if returncode is None:
        return None
    number = -returncode if returncode < 0 else returncode - 128 if 128 < returncode <= 128 + 64 else None
    if number is None:
        return None
    try:
        sig = signal.Signals(number)
    except ValueError:
        return None
    return int(sig) if sig in KILLED else None


def is_machine(exc: BaseException) -> bool:
    return isinstance(exc, MachineFault) or errno_of(exc) is not None


def check(exc: BaseException, path=None) -> None:
    """Raise :class:`MachineFault` (from ``exc``) when ``exc`` is a fault of the machine;
    return when it is one of the input, which the caller then records."""
    if isinstance(exc, MachineFault):
        raise exc
    number = errno_of(exc)
    if number is not None:
        where = path or getattr(exc, "filename", None) or "?"
        raise MachineFault(where, str(exc), errno=number) from exc


def check_process(returncode: int | None, stderr: str, path, what: str = "ffmpeg") -> None:
    """Raise :class:`MachineFault` when a subprocess that failed was killed from outside or
    says that it met a machine errno (``path``: its input or output, for the message)."""
    sig = signal_fault(returncode)
    if sig is not None:
        raise MachineFault(path, f"{what} was killed", signal=sig)
    number = errno_in_text(stderr)
    if number is not None:
        tail = " ".join(stderr.strip().splitlines()[-2:])
        raise MachineFault(path, f"{what} failed: {tail}", errno=number)


def recorded(reason: str | None) -> bool:
    """Whether a reason written into a status table (by a run before this module existed)
    is a fault of the machine: such a row is not final, and its job runs again."""
    if not reason:
        return False
    if errno_in_text(reason) is not None:
        return True
    m = _EXIT_SIGNAL.search(reason)
    return bool(m) and signal_fault(-int(m.group(1))) is not None
