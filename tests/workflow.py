"""Run the real Snakemake workflow in a temporary working directory."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# sources_per_job: auto fills the CPUs Snakemake may use (rules/common.smk, job_slots). The
# tests' Snakemake runs on at most SLOTS of them, so that auto plans the same units of
# several sources on every machine as on the 2-CPU CI machine.
SLOTS = 2


def slots() -> int:
    """The CPUs the tests' Snakemake plans its units for."""
    return min(SLOTS, len(os.sched_getaffinity(0)))


def on_slots() -> None:  # runs in the Snakemake child before it starts
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:SLOTS])


def make_workdir(tmp: Path, sources: str | None = None, config: dict | None = None) -> Path:
    """A working directory with the repository's config (the defaults: ``sources_per_job:
    auto``, units of several sources) with ``config`` merged in, its annotations and the
    given sources. One source per job is an extra case: ``config={"sources_per_job": 1}``."""
    (tmp / "config").mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for key, value in (config or {}).items():
        if isinstance(value, dict):
            cfg.setdefault(key, {}).update(value)
        else:
            cfg[key] = value
    (tmp / "config" / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    if sources is None:
        shutil.copy(REPO / "config" / "sources.tsv", tmp / "config" / "sources.tsv")
    else:
        (tmp / "config" / "sources.tsv").write_text(sources)
    shutil.copytree(REPO / "annotations", tmp / "annotations", dirs_exist_ok=True)
    return tmp


def set_config(workdir: Path, section: str, **values) -> None:
    path = workdir / "config" / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg.setdefault(section, {}).update(values)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def snakemake(workdir: Path, *args: str, check: bool = True, timeout: int = 1500) -> subprocess.CompletedProcess:
    env = dict(os.environ, YOLO_OFFLINE="1")
    env.setdefault("YOLO_CONFIG_DIR", str(workdir / ".yolo"))
    cmd = [*SNAKEMAKE, "-s", str(REPO / "workflow" / "Snakefile"), "-d", str(workdir), "--cores", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, preexec_fn=on_slots)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def jobs_ran(proc: subprocess.CompletedProcess) -> dict[str, int]:
    """Rule -> number of jobs, from Snakemake's job-stats table (dry run or real run)."""
    text = proc.stdout + proc.stderr
    counts: dict[str, int] = {}
    block = text.split("Job stats:", 1)
    if len(block) < 2:
        return counts
    for line in block[1].splitlines()[3:]:
        m = re.match(r"^(\S+)\s+(\d+)$", line.strip())
        if not m:
            break
        if m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def dry_run_jobs(workdir: Path, *targets: str) -> dict[str, int]:
    return jobs_ran(snakemake(workdir, "-n", *targets))


def once_per_session(tmp_path_factory, name: str, make) -> Path:
    """The folder ``<session>/<name>``, made by ``make(folder)`` once per pytest session:
    under a file lock in the folder above the xdist workers' base folders (which are
    siblings), so that a module on another worker waits for it and reuses it."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    base = root / name
    with FileLock(str(root / f"{name}.lock")):
        if not (base / "done").is_file():
            shutil.rmtree(base, ignore_errors=True)
            base.mkdir()
            make(base)
            (base / "done").touch()
    return base
