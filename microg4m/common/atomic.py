"""Atomic file writes: write to a temporary name in the same folder, then rename.

An interrupted run therefore never leaves a half-written file under the final name, and a
write that the machine fails (no space ...) raises faults.MachineFault naming the file.
"""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from pathlib import Path
from typing import Iterator

from microg4m.common import faults


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it to ``path`` if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = suffix or f".tmp{path.suffix}"
    # A writer killed mid-write (SIGKILL, power loss) left its temporary behind; the next
    # writer of the same file removes it (one job writes a given output at a time).
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*{glob.escape(suffix)}"):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        if tmp.exists():
            os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; results are shared on clusters
        os.replace(tmp, path)
    except OSError as exc:  # no space, a quota, EIO ...: a fault of the machine, named with the file
        faults.check(exc, path)
        raise
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")



def write_csv(path: str | os.PathLike, df, **kwargs) -> None:
    """Write a pandas DataFrame atomically (``lineterminator`` fixed for byte-identical output)."""
    kwargs.setdefault("index", False)
    kwargs.setdefault("lineterminator", "\n")
    with atomic_path(path) as tmp:
        df.to_csv(tmp, **kwargs)


def write_tsv(path: str | os.PathLike, df, **kwargs) -> None:
    write_csv(path, df, sep="\t", **kwargs)
