"""Separate Python environments for the labelling tools whose pins collide with ours
(Label Studio: Django, numpy 2.2, openai 1.x, pyarrow 24; Datumaro: pyarrow 25 and
opencv-python-headless beside our opencv-python; cvat-cli and the CVAT SDK, kept apart so
that their pins never move ours). Each is a venv built once from PyPI with
pinned versions and cached (``$MICROG4M_TOOL_ENVS``, else ``~/.cache/microg4m/tool-envs``)
under a name that holds the hash of its requirements: a new pin builds a new one.

The tests run the tool's own code in that environment as a subprocess (its validation, its
server, its importers) and read back what it printed; microg4m is never installed there.
A machine that cannot build one (no PyPI) skips those tests with the reason.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

# the tools as the tests use them (licences: Label Studio Apache-2.0, Datumaro MIT, cvat-cli MIT)
TOOLS = {
    "labelstudio": ["label-studio==1.23.2"],
    "datumaro": ["datumaro==1.13.12"],
    "cvat-cli": ["cvat-cli==2.80.0"],
}


def root() -> Path:
    return Path(os.environ.get("MICROG4M_TOOL_ENVS") or Path.home() / ".cache" / "microg4m" / "tool-envs")


def env_python(name: str) -> Path:
    """The python of the tool's environment, built first if it is not there (under a lock:
    one build per machine, whichever test or worker asks first)."""
    reqs = TOOLS[name]
    tag = hashlib.sha256("\n".join([sys.version.split()[0], *reqs]).encode()).hexdigest()[:12]
    folder = root() / f"{name}-{tag}"
    python = folder / "bin" / "python"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if not (folder / "ready").is_file():
            log = folder.with_suffix(".log")
            try:
                subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True,
                               capture_output=True, timeout=300)
                with open(log, "w") as fh:
                    subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", *reqs],
                                   check=True, stdout=fh, stderr=subprocess.STDOUT, timeout=1500)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
                pytest.skip(f"cannot build the {name} environment ({' '.join(reqs)}) from PyPI: {exc}; "
                            f"see {log}")
            (folder / "ready").touch()
    return python


def run_in(name: str, code: str, *args: str, timeout: int = 600, **kw) -> subprocess.CompletedProcess:
    """``python -c code args`` in the tool's environment; AssertionError with its output when it fails."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(kw.pop("env", {}))
    proc = subprocess.run([str(env_python(name)), "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)
    if proc.returncode != 0:
        raise AssertionError(f"{name}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc
