"""A real single-node SLURM for the tests, from ../shared/tools/slurm-local (beside the repository).

``start_slurm.sh`` installs Debian's slurm-wlm (+ munge, MariaDB and slurmdbd for
accounting, so that ``sacct`` works) with apt and starts the daemons as root, without
systemd; ``stop_slurm.sh`` stops them by PID. Started once per test session; a cluster
that was already running before the session is used and left running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO.parent / "shared" / "tools" / "slurm-local"


@dataclass
class SlurmCluster:
    dir: Path  # $SLURM_LOCAL_DIR: configs, logs, state, client wrappers
    env: dict = field(default_factory=dict)  # os.environ + PATH with the wrappers + SLURM_CONF
    start_s: float = 0.0  # wall time of start_slurm.sh
    started_here: bool = False  # False: it was running before this session

    def run(self, *cmd: str, timeout: int = 30) -> str:
        """A SLURM client command (sacct, scontrol, ...) against this cluster; its stdout."""
        return subprocess.run(list(cmd), env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=True).stdout


def _daemons_alive(d: Path) -> bool:
    """True if every daemon listed in $D/pids is alive under its expected name."""
    try:
        lines = (d / "pids").read_text().split()
    except OSError:
        return False
    pairs = list(zip(lines[::2], lines[1::2]))
    for name, pid in pairs:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != name:
                return False
        except OSError:
            return False
    return bool(pairs)


def skip_reason() -> str | None:
    """Why SLURM cannot be started here, or None."""
    if not (SCRIPTS / "start_slurm.sh").is_file() or not (SCRIPTS / "stop_slurm.sh").is_file():
        return f"SLURM scripts not found in {SCRIPTS} (the shared/ folder beside the repository)"
    if os.name != "posix" or os.geteuid() != 0:
        return "starting SLURM needs root (apt-get install, munge and slurm daemons)"
    installed = shutil.which("slurmctld") or Path("/usr/sbin/slurmctld").exists()
    if not installed and not shutil.which("apt-get"):
        return "slurm-wlm is not installed and apt-get is not available"
    return None


@pytest.fixture(scope="session")
def slurm_cluster():
    """Start the local SLURM (FAKE_GPU=1, accounting on) once per session; stop it at the end."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    d = Path(os.environ.get("SLURM_LOCAL_DIR", "/tmp/slurm-local"))
    was_running = _daemons_alive(d)
    env = dict(os.environ, SLURM_LOCAL_DIR=str(d),
               FAKE_GPU="1",  # the node offers one GPU (backed by /dev/null): the profile's --gpus=1 is accepted
               ACCOUNTING="1",  # sacct works: the plugin's default status command, and the test reads it
               WITH_VENV="0",  # the tests use this repository's venv
               SMOKE="0")  # the workflow run is the smoke test
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(SCRIPTS / "start_slurm.sh")], env=env,
                          capture_output=True, text=True, timeout=600)
    start_s = time.monotonic() - t0
    if proc.returncode != 0:
        out = proc.stdout + proc.stderr
        if "apt-get install" in out and "packages ok" not in out:  # no package source here
            apt_log = d / "log" / "apt.log"
            detail = apt_log.read_text()[-800:] if apt_log.exists() else out[-800:]
            pytest.skip(f"slurm-wlm could not be installed with apt:\n{detail}")
        pytest.fail(f"start_slurm.sh failed (rc {proc.returncode}):\n{out[-4000:]}")
    cluster = SlurmCluster(
        dir=d,
        env=dict(os.environ, PATH=f"{d / 'bin'}:{os.environ.get('PATH', '')}",
                 SLURM_CONF=str(d / "etc" / "slurm.conf")),
        start_s=start_s,
        started_here=not was_running,
    )
    try:
        yield cluster
    finally:
        if cluster.started_here:
            subprocess.run(["bash", str(SCRIPTS / "stop_slurm.sh")], env=env,
                           capture_output=True, text=True, timeout=120)
