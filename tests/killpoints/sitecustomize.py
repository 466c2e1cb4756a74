"""Kill points for tests/test_interrupt.py (test-only; imported by Python at start-up when
this folder is on PYTHONPATH, in Snakemake and in every job process it starts).

``MICROG4M_KILL_AT="EVENT PATTERN"`` and ``MICROG4M_KILL_MARK=FILE``: when EVENT happens to
a path that matches PATTERN (relative to the working directory, matched by
``PurePath.match``: ``*`` stays inside one path part), the process writes FILE (the first
process to get there) and waits there. The test, which watches for FILE, then sends
SIGKILL to the run's process group: the kill lands exactly at that point of the job,
however fast or slow the machine is.

EVENT: ``before-replace`` / ``after-replace`` (os.replace or os.rename of a file or folder
onto the path: the atomic writes and trim's and frames' moves), ``created``
(tempfile.mkstemp or mkdtemp made the path: a temporary about to be written).
"""

import os


def _install(event: str, pattern: str, mark: str) -> None:
    import tempfile
    import time
    from pathlib import PurePath

    def hit(path) -> None:
        rel = os.path.relpath(os.path.abspath(os.fspath(path)))
        if not PurePath(rel).match(pattern):
            return
        # The mark appears with its text (a link to a finished file), never empty.
        tmp = f"{mark}.{os.getpid()}"
        with open(tmp, "w") as fh:
            fh.write(f"{event} {rel}\n")
        try:
            os.link(tmp, mark)
        except FileExistsError:
            pass  # another job got there first: wait for the kill too
        os.unlink(tmp)
        while True:
            time.sleep(3600)

    def moving(move):
        def wrapper(src, dst, *args, **kwargs):
            if event == "before-replace":
                hit(dst)
            out = move(src, dst, *args, **kwargs)
            if event == "after-replace":
                hit(dst)
            return out
        return wrapper

    def creating(make, first):
        def wrapper(*args, **kwargs):
            out = make(*args, **kwargs)
            hit(out[1] if first else out)
            return out
        return wrapper

    if event in ("before-replace", "after-replace"):
        os.replace, os.rename = moving(os.replace), moving(os.rename)
    elif event == "created":
        tempfile.mkstemp = creating(tempfile.mkstemp, True)
        tempfile.mkdtemp = creating(tempfile.mkdtemp, False)
    else:
        raise ValueError(f"MICROG4M_KILL_AT: unknown event {event!r}")


if os.environ.get("MICROG4M_KILL_AT"):
    _event, _pattern = os.environ["MICROG4M_KILL_AT"].split(" ", 1)
    _install(_event, _pattern, os.environ["MICROG4M_KILL_MARK"])
