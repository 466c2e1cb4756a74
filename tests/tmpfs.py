"""A small tmpfs mounted for a test: a filesystem that really fills up (ENOSPC), grows, or
turns read-only (EROFS). Needs root and ``mount``; a test that asks for one is skipped,
with the reason, where it cannot be mounted."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


def available() -> str | None:
    """Why no tmpfs can be mounted here (None: it can)."""
    if os.geteuid() != 0:
        return "a tmpfs of its own needs root (mount)"
    if shutil.which("mount") is None:
        return "no mount command"
    return None


@contextlib.contextmanager
def tmpfs(path: Path, size: int):
    """``path`` (made if missing) with a tmpfs of ``size`` bytes mounted on it, unmounted after."""
    why = available()
    if why:
        pytest.skip(why)
    path.mkdir(parents=True, exist_ok=True)
    proc = _mount("-t", "tmpfs", "-o", f"size={int(size)}", "tmpfs", str(path))
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def resize(path: Path, size: int) -> None:
    """Grow (or shrink) the tmpfs mounted on ``path`` to ``size`` bytes."""
    proc = _mount("-o", f"remount,size={int(size)}", str(path))
    assert proc.returncode == 0, proc.stderr


def read_only(path: Path, on: bool = True) -> None:
    proc = _mount("-o", f"remount,{'ro' if on else 'rw'}", str(path))
    assert proc.returncode == 0, proc.stderr


def used(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def fill(path: Path, leave: int) -> Path:
    """Write a file that leaves ``leave`` bytes free on the filesystem of ``path``."""
    st = os.statvfs(path)
    ballast = path / ".ballast"
    size = st.f_bavail * st.f_frsize - leave
    with open(ballast, "wb") as fh:
        if size > 0:
            os.posix_fallocate(fh.fileno(), 0, size)
    return ballast
