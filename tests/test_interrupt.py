"""Interruption: SIGKILL the workflow during trim, detect and track; the resumed run finishes
and every table is byte-identical to an uninterrupted run of the same inputs.

Two real runs over the same three demo sources (one source per job): a reference run
straight through, and a run killed three times, each time with SIGKILL to its whole
process group (Snakemake and its job processes) while a job of the named stage is
running, then unlocked and resumed with the workflow's default profile (which sets
``rerun-incomplete``). At every kill point no file under a final name may be
half-written: each table that exists is already byte-identical to the reference.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from workflow import REPO, SNAKEMAKE, make_workdir, snakemake

SOURCES = "source_id\turl\tclip_type\n" + "".join(
    f"{s}\tresources/demo/{s}.mp4\tr\n" for s in ("dancer", "pianist", "zidane"))
CONFIG = {"download": {"retries": 1}, "detect": {"imgsz": 256}}
PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
TABLES = {".csv", ".tsv", ".txt", ".pbtxt"}
# Files that record when and how long, not what: never compared.
VOLATILE = ("logs/", "benchmarks/")


def _cmd(wd: Path, *args: str) -> list[str]:
    return [*SNAKEMAKE, "-s", str(REPO / "workflow" / "Snakefile"), "-d", str(wd), "--cores", "2", *args]


def _env(wd: Path) -> dict:
    env = dict(os.environ, YOLO_OFFLINE="1")
    env.setdefault("YOLO_CONFIG_DIR", str(wd / ".yolo"))
    return env


def run_and_kill(wd: Path, when, what: str, *args: str, timeout: float = 600) -> str:
    """Start the workflow in its own process group; SIGKILL the group when ``when()`` returns
    a description of the running job. Returns it; fails if the run ends first."""
    log = open(wd / f"run_killed_during_{what}.log", "w")
    proc = subprocess.Popen(_cmd(wd, *args), stdout=log, stderr=subprocess.STDOUT, env=_env(wd),
                            start_new_session=True)  # a new session: its own process group
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            hit = when()
            if hit:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                time.sleep(0.5)  # let the killed group's files settle before looking
                return hit
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    raise AssertionError(f"the run ended before a {what} job could be killed (rc {proc.returncode}):\n"
                         + (wd / f"run_killed_during_{what}.log").read_text()[-3000:])


# --- kill points: a job of the stage is running ---------------------------------------

def trimming(res: Path):
    """trim's temporary segment folder exists (ffmpeg is writing segments)."""
    tmp = [p for p in res.glob("clips/*/.*") if p.is_dir()]
    return f"trim: {tmp[0].relative_to(res)}" if tmp else None


def detecting(res: Path):
    """detect's temporary parquet exists (frames are going through YOLO)."""
    tmp = list(res.glob("detections/.*.tmp.parquet"))
    return f"detect: {tmp[0].relative_to(res)}" if tmp else None


def tracking(res: Path, started: dict):
    """a track job has been running for 2 s (boxmot loaded, clips being tracked)."""
    for log in res.glob("logs/track/*.log"):
        if not (res / "tracks" / f"{log.stem}.csv").exists():
            first = started.setdefault(log.stem, time.monotonic())
            if time.monotonic() - first > 2.0:
                return f"track: {log.stem}"
    return None


# --- comparison -----------------------------------------------------------------------

def result_files(res: Path) -> dict[str, Path]:
    return {p.relative_to(res).as_posix(): p for p in res.rglob("*")
            if p.is_file() and not p.relative_to(res).as_posix().startswith(VOLATILE)}


def temporary(res: Path) -> list[str]:
    """Temporary names (a leading dot): atomic writes and trim's segment folders (not
    Snakemake's own marker in directory outputs)."""
    return sorted(p.relative_to(res).as_posix() for p in res.rglob(".*") if p.name != ".snakemake_timestamp")


def differences(ref: Path, res: Path, only=None) -> list[str]:
    """Files of ``res`` that differ from the reference (``only``: a set of suffixes)."""
    ref_files, files = result_files(ref), result_files(res)
    out = []
    for name, path in sorted(files.items()):
        if name.rsplit("/", 1)[-1].startswith(".") or (only and path.suffix not in only):
            continue
        if name not in ref_files:
            out.append(f"{name}: not in the reference run")
        elif path.read_bytes() != ref_files[name].read_bytes():
            if path.suffix == ".parquet" and pq.read_table(path).equals(pq.read_table(ref_files[name])) \
                    and pq.read_schema(path).metadata == pq.read_schema(ref_files[name]).metadata:
                out.append(f"{name}: same table and metadata, different bytes")
            else:
                out.append(f"{name}: differs")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("interrupt")
    ref = make_workdir(base / "reference", sources=SOURCES, config=CONFIG)
    snakemake(ref)
    wd = make_workdir(base / "killed", sources=SOURCES, config=CONFIG)
    res = wd / "results"
    kills = []  # (what, description, differing tables at that moment, temporaries)
    started: dict = {}
    points = [("trim", lambda: trimming(res)), ("detect", lambda: detecting(res)),
              ("track", lambda: tracking(res, started))]
    for i, (what, when) in enumerate(points):
        hit = run_and_kill(wd, when, what, *([] if i == 0 else PROFILE))
        kills.append((what, hit, differences(ref / "results", res, only=TABLES), temporary(res)))
        locked = snakemake(wd, check=False)  # a killed run leaves its lock behind
        assert locked.returncode != 0 and "cannot be locked" in locked.stdout + locked.stderr
        snakemake(wd, "--unlock")
    final = snakemake(wd, *PROFILE)
    return ref, wd, kills, final


def test_each_kill_hit_a_running_job_of_its_stage(runs):
    ref, wd, kills, final = runs
    for what, hit, _, tmp in kills:
        print(f"killed during {hit}; temporaries then: {tmp}")
    assert [k[0] for k in kills] == ["trim", "detect", "track"]
    for what, hit, _, _ in kills:
        assert hit.startswith(f"{what}: "), hit


def test_nothing_half_written_under_a_final_name_at_any_kill(runs):
    """Every table present when the run was killed is already the finished one."""
    ref, wd, kills, final = runs
    for what, hit, diffs, _ in kills:
        assert diffs == [], f"killed during {hit}: {diffs}"


def test_the_resumed_run_used_the_profile_and_finished(runs):
    ref, wd, kills, final = runs
    out = final.stdout + final.stderr
    assert "Using workflow specific profile" in out
    assert (wd / "results" / "ledger.tsv").is_file() and (wd / "results" / "export").is_dir()
    dry = snakemake(wd, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr


def test_every_table_is_byte_identical_to_the_uninterrupted_run(runs):
    ref, wd, kills, final = runs
    tables = [n for n, p in result_files(ref / "results").items() if p.suffix in TABLES]
    for stage in ("filter/", "tracks/", "export/", "ledger.tsv", "funnel.tsv", "clips/", "download/"):
        assert any(n.startswith(stage) for n in tables), stage
    assert sorted(n for n, p in result_files(wd / "results").items() if p.suffix in TABLES
                  and not p.name.startswith(".")) == sorted(tables)
    assert differences(ref / "results", wd / "results", only=TABLES) == []


def test_every_other_output_is_identical_too(runs):
    """Clips, detections, frames, previews: reported by name if any differs."""
    ref, wd, kills, final = runs
    assert differences(ref / "results", wd / "results") == []


def test_killed_jobs_leave_no_temporary_file_behind(runs):
    ref, wd, kills, final = runs
    assert any(tmp for _, _, _, tmp in kills), "the kills left no temporary at all (kill points too late?)"
    assert temporary(wd / "results") == []
