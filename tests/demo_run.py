"""One real run of the demo (``.test/demo``, as ``.test/README.md`` runs it: the README's
demo sources, config and labels at detect.imgsz 320, the default ``sources_per_job:
auto``), made once per pytest session and copied by each module that starts from it
(tests/test_default_path.py, tests/test_release.py): each module changes its own copy.

The run is made under a file lock in the folder above the xdist workers' base folders
(which are siblings): the first module to ask makes it, a module on the other worker
waits and copies the same run. A copy keeps the files' modification times
(``shutil.copytree``), so that Snakemake finds the copy finished as the run was.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workflow import REPO, once_per_session, snakemake

CASE = ".test/demo"
RESULTS = f"{CASE}/results"
# the download records and the release carry dates: the run takes them from here
# (microg4m/formats/provenance.py), 2026-01-01
EPOCH = "1767225600"


def run(wd: Path, *args: str, **kw):
    """The workflow on the demo case, as ``.test/README.md`` runs it."""
    return snakemake(wd, "--configfile", str(wd / CASE / "config.yaml"), *args, **kw)


def _make(wd: Path) -> None:
    wd.mkdir(parents=True)
    for name in ("config", "annotations", ".test"):
        shutil.copytree(REPO / name, wd / name, ignore=shutil.ignore_patterns("results"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOURCE_DATE_EPOCH", EPOCH)
        run(wd)


def demo_copy(tmp_path_factory, dest: Path) -> Path:
    """A copy of the session's demo run at ``dest`` (the run made first if no module has)."""
    base = once_per_session(tmp_path_factory, "demo_run", lambda folder: _make(folder / "wd"))
    shutil.copytree(base / "wd", dest, symlinks=True)
    return dest
