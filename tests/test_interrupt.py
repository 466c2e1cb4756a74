"""Interruption: SIGKILL the workflow at many points of download, trim, detect, track,
frames and export; after ``snakemake --unlock`` and a resume every file under
``results/`` is byte-identical to an uninterrupted run of the same inputs.

Two real runs over the same three demo sources (one source per job): a reference run
straight through, and a run killed once at each kill point below, each time with SIGKILL
to its whole process group (Snakemake and its job processes), then unlocked (``snakemake
--unlock`` after the first kill; after the others the test removes the lock files itself,
as --unlock does, to spare a Snakemake start each time) and resumed with the workflow's
default profile (which sets ``rerun-incomplete``).

The kill points do not depend on the machine's speed: each is an event of the job
itself (a file moved into place, a temporary created; tests/killpoints/sitecustomize.py).
The job that reaches it first stops there and the test kills the group at that moment.
Each killed run goes ``--until`` the stage of its kill point, so that every point still
finds jobs of its stage to run. At every kill no file under a final name may be
half-written: each file that exists is already byte-identical to the reference.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from microg4m.formats.results_index import ResultsIndex
from workflow import REPO, SNAKEMAKE, make_workdir, on_slots, snakemake

SOURCES = "source_id\turl\tclip_type\n" + "".join(
    f"{s}\tresources/demo/{s}.mp4\tr\n" for s in ("dancer", "pianist", "zidane"))
CONFIG = {"download": {"retries": 1}, "detect": {"imgsz": 256}}
PROFILE = ["--workflow-profile", str(REPO / "workflow" / "profiles" / "default")]
KILLPOINTS = Path(__file__).resolve().parent / "killpoints"
TABLES = {".csv", ".tsv", ".txt", ".pbtxt", ".json"}
# Files that record when and how long, not what: never compared.
# logs, timings, and the near-duplicate cache (valid by its signature files' mtimes)
VOLATILE = ("logs/", "benchmarks/", "cache/duplicates/")

# (rule, event, path pattern, the state the kill leaves). "after-replace" of a job's last
# output kills it after it wrote everything but before Snakemake recorded it as finished:
# the resume runs it again over its own finished files. One point per way a job can be
# caught (a temporary open, a file checked but not in place, some outputs in place, all in
# place but not recorded) and per stage; the points dropped to keep CI short were the
# second of a kind within a stage (download's video in place without its table, trim's
# status without its manifest, track's table not yet in place, frames' done list written).
KILL_POINTS = [
    ("download", "before-replace", "results/download/videos/*.mp4",
     "the video checked and its record written, the video not yet in place"),
    ("download", "after-replace", "results/download/*.tsv", "all written, the job not recorded"),
    ("trim", "after-replace", "results/clips/*/*_000.mp4", "the first clip in place, the others not"),
    ("detect", "created", "results/detections/.*.parquet", "YOLO about to run, the cache's temporary open"),
    ("detect", "after-replace", "results/detections/*.parquet", "the cache in place, the job not recorded"),
    # Issue 13 (speed) adds a runtime export cache to detect. Its kill point goes here once
    # the cache exists: ("detect", "created", "<cache folder>/.*", "the exported runtime
    # being written"); a later job must never take a half-written export for a finished one.
    ("track", "after-replace", "results/tracks/*.csv", "the table in place, the contact sheet not written"),
    ("frames", "created", "results/frames/*/.*_001.*",
     "the first clip's frames in place, ffmpeg about to write the next clip's into a temporary folder"),
    ("export", "after-replace", "results/export/boxes.csv", "the first file of the export folder written"),
    ("export", "after-replace", "results/export/input_report.tsv", "the last file written, the job not recorded"),
]


def _cmd(wd: Path, *args: str) -> list[str]:
    return [*SNAKEMAKE, "-s", str(REPO / "workflow" / "Snakefile"), "-d", str(wd), "--cores", "2", *args]


def _env(wd: Path, event: str, pattern: str, mark: Path) -> dict:
    env = dict(os.environ, YOLO_OFFLINE="1", MICROG4M_KILL_AT=f"{event} {pattern}", MICROG4M_KILL_MARK=str(mark))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(KILLPOINTS), env.get("PYTHONPATH")) if p)
    env.setdefault("YOLO_CONFIG_DIR", str(wd / ".yolo"))
    return env


def run_and_kill(wd: Path, i: int, rule: str, event: str, pattern: str, *args: str, timeout: float = 600) -> str:
    """Run the workflow until ``rule`` in its own process group, stopping the first job that
    reaches the kill point; SIGKILL the group then. Returns the point as the job wrote it
    (``EVENT PATH``); fails if the run ends first."""
    mark = wd / f".kill{i}"
    name = wd / f"run_killed_{i}_{rule}.log"  # the log of the run with kill point i
    with open(name, "w") as log:
        proc = subprocess.Popen(_cmd(wd, "--until", rule, *args), stdout=log, stderr=subprocess.STDOUT,
                                env=_env(wd, event, pattern, mark), start_new_session=True, preexec_fn=on_slots)
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None and time.monotonic() < deadline and not mark.exists():
                time.sleep(0.02)
            if mark.exists():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                assert not group_alive(proc.pid), "a process of the killed run survived"
                return mark.read_text().strip()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    raise AssertionError(f"the run ended before any {rule} job reached '{event} {pattern}' "
                         f"(rc {proc.returncode}):\n" + name.read_text()[-3000:])


def unlock(wd: Path) -> None:
    """Remove the locks a killed run left, as ``snakemake --unlock`` does (Snakemake's file
    persistence: the folder ``.snakemake/locks`` and its lock files)."""
    locks = wd / ".snakemake" / "locks"
    assert any(locks.iterdir()), "the killed run left no lock"
    shutil.rmtree(locks)


def group_alive(pgid: int, wait: float = 5.0) -> list[int]:
    """Processes of the group that still run (not zombies), after up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        alive = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive.append(int(stat.parent.name))
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


# --- comparison -----------------------------------------------------------------------

def result_files(res: Path) -> dict[str, Path]:
    return {p.relative_to(res).as_posix(): p for p in res.rglob("*")
            if p.is_file() and not p.relative_to(res).as_posix().startswith(VOLATILE)}


def temporary(res: Path) -> list[str]:
    """Temporary names (a leading dot): atomic writes, download staging, trim's and frames'
    folders (not Snakemake's own marker in directory outputs)."""
    return sorted(p.relative_to(res).as_posix() for p in res.rglob(".*") if p.name != ".snakemake_timestamp")


def same_record(a: Path, b: Path) -> bool:
    """Two download records alike but for the linked local file's modification time, which
    is each working directory's own (its demo videos are made in its run)."""
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    for r in (ra, rb):
        r.get("local", {}).pop("mtime_ns", None)
    return ra == rb


def differences(ref: Path, res: Path, only=None) -> list[str]:
    """Files of ``res`` that differ from the reference (``only``: a set of suffixes);
    files under temporary names (in any hidden folder) are not compared."""
    ref_files, files = result_files(ref), result_files(res)
    out = []
    for name, path in sorted(files.items()):
        if any(part.startswith(".") for part in name.split("/")) or (only and path.suffix not in only):
            continue
        if name not in ref_files:
            out.append(f"{name}: not in the reference run")
        elif path.read_bytes() != ref_files[name].read_bytes():
            if name.endswith(".record.json") and same_record(path, ref_files[name]):
                continue
            if path.suffix == ".parquet" and pq.read_table(path).equals(pq.read_table(ref_files[name])) \
                    and pq.read_schema(path).metadata == pq.read_schema(ref_files[name]).metadata:
                out.append(f"{name}: same table and metadata, different bytes")
            else:
                out.append(f"{name}: differs")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    # the download records hold the download time: both runs take it from SOURCE_DATE_EPOCH
    # (microg4m/formats/provenance.py), or no two runs could be byte-identical
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOURCE_DATE_EPOCH", "1767225600")
        return _runs(tmp_path_factory)


def _runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("interrupt")
    ref = make_workdir(base / "reference", sources=SOURCES, config=CONFIG)
    t = time.monotonic()
    snakemake(ref)
    print(f"reference run: {time.monotonic() - t:.1f} s")
    wd = make_workdir(base / "killed", sources=SOURCES, config=CONFIG)
    res = wd / "results"
    kills = []  # (rule, point written by the job, files differing from the reference then, temporaries)
    t0 = time.monotonic()
    for i, (rule, event, pattern, _) in enumerate(KILL_POINTS):
        t = time.monotonic()
        hit = run_and_kill(wd, i, rule, event, pattern, *([] if i == 0 else PROFILE))
        kills.append((rule, hit, differences(ref / "results", res), temporary(res)))
        if i == 0:
            locked = snakemake(wd, check=False)  # a killed run leaves its lock behind
            assert locked.returncode != 0 and "cannot be locked" in locked.stdout + locked.stderr
            snakemake(wd, "--unlock")  # as a user does
            assert not (wd / ".snakemake" / "locks").exists()  # what unlock() below leaves too
        else:  # what --unlock does (the lock files removed), without a Snakemake start each time
            unlock(wd)
        print(f"kill point {i} ({rule}): run, kill and unlock took {time.monotonic() - t:.1f} s")
    final = snakemake(wd, *PROFILE)
    print(f"{len(KILL_POINTS)} kills and the resume took {time.monotonic() - t0:.1f} s")
    (wd / f"run_resumed_{len(KILL_POINTS)}.log").write_text(final.stdout + final.stderr)
    return ref, wd, kills, final


def run_log(wd: Path, n: int) -> str:
    """The output of the n-th run of the killed workdir (the run of kill point n, or the resume)."""
    (path,) = [*wd.glob(f"run_killed_{n}_*.log"), *wd.glob(f"run_resumed_{n}.log")]
    return path.read_text()


def jobs_in(log: str) -> list[tuple[str, list[str], str]]:
    """(rule, outputs, reason) of each job a Snakemake run log lists."""
    jobs = []
    for m in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)", log, re.M):
        fields = dict(re.findall(r"^    (\w+): (.*)$", m.group(2), re.M))
        jobs.append((m.group(1), fields.get("output", "").split(", "), fields.get("reason", "")))
    return jobs


def test_each_kill_stopped_a_job_of_its_stage_at_its_point(runs):
    ref, wd, kills, final = runs
    for (rule, event, pattern, state), (_, hit, _, tmp) in zip(KILL_POINTS, kills):
        print(f"{rule}: killed at {hit} ({state}); temporaries then: {tmp}")
    assert len(kills) == len(KILL_POINTS)
    for (rule, event, pattern, _), (_, hit, _, _) in zip(KILL_POINTS, kills):
        got_event, path = hit.split(" ", 1)
        assert got_event == event and Path(path).match(pattern), (hit, pattern)


def test_jobs_killed_after_their_last_output_ran_again_over_it(runs):
    """A job killed after it wrote everything, before Snakemake recorded it, is run again by a
    later run (rerun-incomplete; not always the next one, which may be killed before it
    gets there) over its own finished files: the case that lost the download facts (issue 14)."""
    ref, wd, kills, final = runs
    for i, ((rule, _, _, state), (_, hit, _, _)) in enumerate(zip(KILL_POINTS, kills)):
        if "not recorded" not in state:
            continue
        path = hit.split(" ", 1)[1]
        later = "".join(run_log(wd, n) for n in range(i + 1, len(KILL_POINTS) + 1))
        again = [(r, reason) for r, outputs, reason in jobs_in(later)
                 if r == rule and any(path == o or path.startswith(o + "/") for o in outputs)]
        assert again, f"killed at {hit}: no later run ran that {rule} job again"


def test_nothing_half_written_under_a_final_name_at_any_kill(runs):
    """Every file present under its final name when the run was killed is the finished one."""
    ref, wd, kills, final = runs
    for rule, hit, diffs, _ in kills:
        assert diffs == [], f"killed at {hit}: {diffs}"


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
    for stage in ("filter/", "tracks/", "export/", "ledger.tsv", "funnel.tsv", "clips/", "download/",
                  "frames/", "versions.tsv"):
        assert any(n.startswith(stage) for n in tables), stage
    assert sorted(n for n, p in result_files(wd / "results").items() if p.suffix in TABLES
                  and not p.name.startswith(".")) == sorted(tables)
    assert differences(ref / "results", wd / "results", only=TABLES) == []


def test_downloads_run_again_over_their_own_files_keep_the_first_record(runs):
    """The download jobs killed after their video was in place ran again and found it: their
    status tables still hold the first run's facts (title, attempts), not 'already downloaded'."""
    ref, wd, kills, final = runs
    index = ResultsIndex(wd / "results")  # sources_per_job auto: a download table per unit of sources
    units = index.units()
    assert sorted(s for sources in units.values() for s in sources) == ["dancer", "pianist", "zidane"]
    for unit, sources in units.items():
        table = index.files(unit).download.read_text()
        assert table == ResultsIndex(ref / "results").files(unit).download.read_text()
        assert "already downloaded" not in table
        assert all(f"\t{src}\t" in table for src in sources)  # yt-dlp's title of each file
    assert sorted(p.name for p in (wd / "results" / "download").iterdir()) == sorted(
        [f"{u}.tsv" for u in units] + ["settings.json", "videos"])
    assert sorted(p.name for p in (wd / "results" / "download" / "videos").iterdir()) == sorted(
        [f"{s}.{ext}" for s in ("dancer", "pianist", "zidane") for ext in ("mp4", "record.json")]
        + [".snakemake_timestamp"])


def test_every_other_output_is_identical_too(runs):
    """Clips, detections, frames, previews: reported by name if any differs."""
    ref, wd, kills, final = runs
    assert sorted(result_files(wd / "results")) == sorted(result_files(ref / "results"))
    assert differences(ref / "results", wd / "results") == []


def test_killed_jobs_leave_no_temporary_file_behind(runs):
    ref, wd, kills, final = runs
    assert any(tmp for _, _, _, tmp in kills), "the kills left no temporary at all"
    assert temporary(wd / "results") == []
