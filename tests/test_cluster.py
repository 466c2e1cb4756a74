"""The demo through cluster executors, for real: cluster-generic (every job a separate
background process) and SLURM (a real single-node slurm-wlm on this machine).

Select or skip them with ``-m cluster`` / ``-m "not cluster"``. Each test prints its wall
time. Two sources each keep them small (every job costs seconds of Snakemake start-up on
a 2-core machine): carphone (one clip with a person: kept) in both, with missing (a
download that fails) for cluster-generic and noperson (one clip, no person: rejected)
for SLURM. YOLO runs at imgsz 320 to keep detect short on CPU. The two runs go at the
same time (the SLURM run mostly waits on sbatch and the plugin's status polls).
"""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from slurm_local import slurm_cluster  # noqa: F401  (session fixture)
from workflow import REPO, SNAKEMAKE, jobs_ran, make_workdir

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

PROFILES = REPO / "workflow" / "profiles"
SNAKEFILE = next(p for p in (REPO / "workflow" / "Snakefile", REPO / "Snakefile") if p.is_file())
SOURCES = {
    "carphone": "resources/demo/carphone.mp4\tm",
    "noperson": "resources/demo/noperson.mp4\tr",
    "missing": "http://127.0.0.1:9/missing.mp4\tr",
}
CONFIG = {"detect": {"imgsz": 320}}
# The decisions of a local run (snakemake --cores 2) of these sources.
EXPECTED_DECISIONS = {"carphone_000": ("1", "kept"), "noperson_000": ("0", "few_persons")}
# run inside the Snakemake process, never submitted
LOCAL_RULES = {"download", "download_settings", "versions", "units", "cache", "all"}


class Running:
    """A Snakemake run started in the background (its own process group): the two cluster
    runs go at the same time, so that the SLURM run's waits (sbatch, the plugin's status
    polls) overlap the cluster-generic run's work instead of holding a test worker idle."""

    def __init__(self, workdir: Path, *args: str, env: dict | None = None):
        env = dict(env or os.environ, YOLO_OFFLINE="1")
        env.setdefault("YOLO_CONFIG_DIR", str(workdir / ".yolo"))
        self.args = args
        self.cmd = [*SNAKEMAKE, "-s", str(SNAKEFILE), "-d", str(workdir), *args]
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=env, start_new_session=True)
        self.done = None

    def finish(self, timeout: int = 420):
        """Wait for the run; kill it (and what it started) ``timeout`` s after its start.

        Returns (CompletedProcess with stdout+stderr in stdout, Snakemake's PID, wall seconds)."""
        if self.done is None:
            try:
                out, _ = self.p.communicate(timeout=max(1.0, self.t0 + timeout - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stop()
                pytest.fail(f"snakemake {' '.join(self.args)} still running after {timeout} s:\n"
                            f"{self.p.communicate()[0][-6000:]}")
            wall = time.monotonic() - self.t0
            self.done = (subprocess.CompletedProcess(self.cmd, self.p.returncode, out, ""), self.p.pid, wall)
        proc = self.done[0]
        assert proc.returncode == 0, f"snakemake {' '.join(self.args)} failed:\n{proc.stdout[-8000:]}"
        return self.done

    def stop(self) -> None:
        """Ctrl-C (Snakemake cancels its jobs: scancel / cancel.sh), then SIGKILL."""
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGINT)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


def run(workdir: Path, *args: str, env: dict | None = None, timeout: int = 420):
    """Run Snakemake on the real workflow to its end (see Running.finish)."""
    return Running(workdir, *args, env=env).finish(timeout)


def sources_table(*ids: str) -> str:
    return "source_id\turl\tclip_type\n" + "".join(f"{i}\t{SOURCES[i]}\n" for i in ids)


def decisions(workdir: Path) -> dict[str, tuple[str, str]]:
    rows = {}
    for path in sorted((workdir / "results" / "filter").glob("*.tsv")):
        with path.open() as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                rows[row["clip_id"]] = (row["keep"], row["reason"])
    return rows


def check_outputs(workdir: Path, ids: tuple[str, ...]) -> None:
    """Ledger, funnel and export exist and say what a local run says."""
    res = workdir / "results"
    got = decisions(workdir)
    assert got == {c: d for c, d in EXPECTED_DECISIONS.items() if c.rsplit("_", 1)[0] in ids}
    # The same decisions when filter runs again locally on the cluster's clips and detections.
    run(workdir, "--workflow-profile", "none", "--cores", "2", "--forcerun", "filter", "--until", "filter")
    assert decisions(workdir) == got
    with (res / "ledger.tsv").open() as fh:
        ledger = list(csv.DictReader(fh, delimiter="\t"))
    sources = {r["source_id"]: r["status"] for r in ledger if r["level"] == "source"}
    assert sources == {i: "failed" if i == "missing" else "downloaded" for i in ids}
    with (res / "funnel.tsv").open() as fh:
        funnel = {r["step"]: r["count"] for r in csv.DictReader(fh, delimiter="\t")}
    failed = int("missing" in ids)
    assert (funnel["sources"], funnel["downloaded"], funnel["kept"]) == (str(len(ids)), str(len(ids) - failed), "1")
    assert funnel.get("failed", "0") == str(failed)
    export = res / "export"
    assert (export / "label_map.pbtxt").is_file() and (export / "annotation_template.csv").is_file()
    boxes = (export / "boxes.csv").read_text()
    assert "carphone_000" in boxes and "noperson" not in boxes and "missing" not in boxes


def report(capsys, text: str) -> None:
    with capsys.disabled():
        print(f"\n[cluster] {text}")


SLURM_TEST = "test_demo_through_local_slurm"


@pytest.fixture(scope="module")
def generic_run(request, tmp_path_factory):
    """The cluster-generic run, started after the SLURM run when that test is selected
    (the two go at once, see Running)."""
    if any(item.name == SLURM_TEST for item in request.session.items):
        try:
            request.getfixturevalue("slurm_run")
        except pytest.skip.Exception:  # no SLURM here: its test reports the reason
            pass
    ids = ("carphone", "missing")
    wd = make_workdir(tmp_path_factory.mktemp("generic") / "wd", sources=sources_table(*ids), config=CONFIG)
    state = wd / ".snakemake" / "cluster-generic"
    running = Running(wd, "--workflow-profile", str(PROFILES / "cluster-generic"),
                      "--seconds-between-status-checks", "1")  # the profile's 5 s, shortened for the test
    try:
        yield wd, ids, running
    finally:  # after a failure or timeout, no job process may outlive the test
        running.stop()
        left = [d.name for d in state.glob("job.*") if not (d / "exitcode").exists()]
        if left:
            subprocess.run([str(PROFILES / "cluster-generic" / "cancel.sh"), *left], cwd=wd, check=False)


def test_demo_through_cluster_generic_runs_every_job_as_its_own_process(generic_run, capsys):
    wd, ids, running = generic_run
    state = wd / ".snakemake" / "cluster-generic"
    proc, snakemake_pid, wall = running.finish()
    report(capsys, f"cluster-generic run: {wall:.1f} s")
    assert "Using workflow specific profile" in proc.stdout
    assert "with external jobid" in proc.stdout  # went through submit.sh

    with (state / "jobs.tsv").open() as fh:
        jobs = [line.rstrip("\n").split("\t") for line in fh]
    stats = jobs_ran(proc)
    submitted = sum(n for rule, n in stats.items() if rule not in LOCAL_RULES)
    assert len(jobs) == submitted, (stats, jobs)
    assert sorted(j[2] for j in jobs) == sorted(
        rule for rule, n in stats.items() if rule not in LOCAL_RULES for _ in range(n))
    pids = [int(j[1]) for j in jobs]
    assert len(set(pids)) == len(pids), "every job must be its own process"
    assert snakemake_pid not in pids and os.getpid() not in pids
    for jobid, pid, rule, *_ in jobs:
        assert (state / jobid / "exitcode").read_text().strip() == "0", (state / jobid / "job.log").read_text()
        # The job's own Snakemake ran exactly this rule, in that process.
        log = (state / jobid / "job.log").read_text()
        assert re.search(rf"--target-jobs '?{rule}:", log), log[-2000:]
    check_outputs(wd, ids)


GPU_RULES = {"detector", "detect"}  # the jobs the profile sends to the GPU partition


def gpu_partition(cluster) -> str:
    """A second partition, ``gpu``, on the cluster's one node (the node that offers the fake
    GPU): the profile's GPU jobs go there, every other job to ``debug``. Made once
    (scontrol create), as a cluster's admin would have made it."""
    if "PartitionName=gpu " not in cluster.run("scontrol", "show", "partition", "-o"):
        node = cluster.run("sinfo", "-h", "-o", "%N").split()[0]
        cluster.run("scontrol", "create", "PartitionName=gpu", f"Nodes={node}", "State=UP", "MaxTime=INFINITE")
    return "gpu"


def slurm_test_profile(dest: Path) -> Path:
    """workflow/profiles/slurm with the few settings this one-node test cluster needs."""
    profile = yaml.safe_load((PROFILES / "slurm" / "config.yaml").read_text())
    profile["default-resources"]["slurm_partition"] = "debug"  # the CPU partition here
    for rule in GPU_RULES:  # the profile's own: the GPU partition, named gpu here too
        assert profile["set-resources"][rule]["slurm_partition"] == "gpu"
        assert profile["set-resources"][rule]["gpu"] == 1
        profile["set-resources"][rule]["cpus_per_gpu"] = 2  # the node has 2 CPUs
    profile["cores"] = 2  # a group job may not ask for more CPUs than the node has
    profile["slurm-init-seconds-before-status-checks"] = 1  # jobs of seconds: poll soon (profile: 30)
    profile["slurm-keep-successful-logs"] = True  # the test reads the sbatch logs
    profile["retries"] = 0  # fail fast
    dest.mkdir(parents=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return dest


class JobWatch(threading.Thread):
    """slurmctld's record of every job (``scontrol show job``), read every 2 s while the run
    goes: slurmctld forgets a finished job after MinJobAge (300 s), sooner than a run on a
    busy machine may take, and sacct does not record the GPU requests."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.cluster, self.jobs, self.halt = cluster, {}, threading.Event()

    def poll(self) -> None:
        try:
            out = self.cluster.run("scontrol", "show", "job", "-o")
        except (subprocess.SubprocessError, OSError):
            return  # read again at the next poll
        for line in out.splitlines():
            m = re.match(r"JobId=(\d+) ", line)
            if m:
                self.jobs[m.group(1)] = line

    def run(self) -> None:
        while not self.halt.wait(2.0):
            self.poll()

    def stop(self) -> None:
        self.halt.set()
        self.join()
        self.poll()


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tmp_path_factory):  # noqa: F811
    ids = ("carphone", "noperson")
    base = tmp_path_factory.mktemp("slurm")
    wd = make_workdir(base / "wd", sources=sources_table(*ids), config=CONFIG)
    gpu_partition(slurm_cluster)
    profile = slurm_test_profile(base / "profile")
    watch = JobWatch(slurm_cluster)
    watch.start()
    running = Running(wd, "--workflow-profile", str(profile), env=slurm_cluster.env)
    try:
        yield wd, ids, running, watch
    finally:
        running.stop()
        watch.halt.set()


def test_demo_through_local_slurm(slurm_cluster, slurm_run, capsys):  # noqa: F811
    report(capsys, f"SLURM start (start_slurm.sh): {slurm_cluster.start_s:.1f} s"
                   + ("" if slurm_cluster.started_here else " (was already running)"))
    wd, ids, running, watch = slurm_run
    proc, _, wall = running.finish(timeout=600)
    watch.stop()
    report(capsys, f"SLURM run: {wall:.1f} s")

    run_id = re.search(r"SLURM run ID: (\S+)", proc.stdout).group(1)
    submitted = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: (\S+?)\)", proc.stdout))
    # demo_media x2, one prep group (trim/scenes/motion/quality of both sources), the detector,
    # detect x2, one post group (filter/track/frames/track_files/signatures of both
    # sources), duplicates, duplicate_sheets, quality_sheets, export, ledger
    kinds = sorted(Path(log).relative_to(wd / ".snakemake" / "slurm_logs").parts[0] for log in submitted.values())
    assert kinds == sorted(["rule_demo_media"] * 2 + ["group_prep_motion_quality_scenes_trim"]
                           + ["rule_detector"] + ["rule_detect"] * 2
                           + ["group_post_filter_frames_signatures_track_track_files"]
                           + ["rule_duplicates", "rule_duplicate_sheets", "rule_quality_sheets", "rule_export",
                              "rule_ledger"]), kinds
    for log in submitted.values():
        assert Path(log).is_file()
    groups = [Path(log).read_text() for log in submitted.values() if "/group_" in log]
    for text in groups:  # each group job ran its rules for both sources
        for src in ids:
            assert f"unit={src}" in text

    # SLURM's own accounting (slurmdbd): every job of this run completed.
    acct = slurm_cluster.run("sacct", "-X", "-n", "-P", "-j", ",".join(submitted), "--format=JobID,JobName,State")
    rows = [line.split("|") for line in acct.split()]
    assert sorted(r[0] for r in rows) == sorted(submitted), acct
    assert all(r[1] == run_id and r[2] == "COMPLETED" for r in rows), acct
    # The detector and detect jobs went to the GPU partition with a GPU, every other job
    # (the group holding track among them) to the CPU partition without one, as
    # slurmctld recorded them while the run went (JobWatch).
    for jobid, log in submitted.items():
        kind = Path(log).relative_to(wd / ".snakemake" / "slurm_logs").parts[0]
        on_gpu = kind in {f"rule_{r}" for r in GPU_RULES}
        job = watch.jobs.get(jobid, "")
        assert f"Partition={'gpu' if on_gpu else 'debug'} " in job, (kind, job)
        assert ("TresPerJob=gres:gpu:1" in job) == on_gpu, (kind, job)
    # detect.device auto was resolved inside the jobs, on the node: there SLURM gave the job
    # its GPU (CUDA_VISIBLE_DEVICES), and torch, the only judge of CUDA, found none (this
    # machine has no GPU; a fake nvidia-smi could not change torch's answer), so the
    # detector made its model for the CPU and each detect job checked its node against it.
    logs = wd / "results" / "logs"
    node = slurm_cluster.run("sinfo", "-h", "-o", "%N").split()[0]
    made = re.search(r"detector: detect.device auto is (\S+) on (\S+) \(CUDA_VISIBLE_DEVICES=(\S+)\)",
                     (logs / "detector.log").read_text())
    assert made and made.group(1) == "cpu" and made.group(2).split(".")[0] == node and made.group(3) != "unset", made
    for src in ids:
        ran = re.search(r"detect: detect.device auto is (\S+) on (\S+) \(CUDA_VISIBLE_DEVICES=(\S+), CUDA not",
                        (logs / "detect" / f"{src}.log").read_text())
        assert ran and ran.group(1) == "cpu" and ran.group(3) != "unset", src
        # track, without a ReID model, ran on the CPU and asked for no GPU (above)
        assert "track: ultralytics tracker on cpu (track.device auto, ReID model none)" in (
            logs / "track" / f"{src}.log").read_text()
    check_outputs(wd, ids)
