"""Job units (``sources_per_job``): the rule itself, and the jobs a real dry run plans
under ``auto`` for 10 and for 10^4 sources."""

import math
import re
from pathlib import Path

import pytest

from microg4m.common.units import AUTO_MAX, make_units, per_job
from workflow import dry_run_jobs, make_workdir, set_config, slots, snakemake

# the stages that run one job per unit; the others run once
PER_UNIT = ["download", "trim", "scenes", "detect", "filter", "quality", "motion", "track", "frames",
            "track_files", "signatures"]
ONCE = {"detector": 1, "versions": 1, "duplicates": 1, "duplicate_sheets": 1, "export": 1, "ledger": 1, "all": 1,
        "cache": 4, "download_settings": 1, "units": 1, "quality_sheets": 1}


def test_auto_fills_the_slots_with_few_jobs_and_caps_their_size():
    assert per_job("auto", 10, 2) == 5  # 2 jobs per stage on 2 CPUs
    assert per_job("auto", 10, 16) == 1
    assert per_job("auto", 3, 2) == 2
    assert per_job("auto", 10_000, 2) == AUTO_MAX == 50
    assert per_job(7, 10_000, 2) == 7
    for bad in [0, -1, 1.5, True, "5"]:
        with pytest.raises(ValueError, match="sources_per_job"):
            per_job(bad, 10, 2)


def test_units_are_runs_of_consecutive_sources_and_appending_keeps_the_earlier_ones():
    ids = [f"s{i}" for i in range(7)]
    assert make_units(ids, 1) == {sid: [sid] for sid in ids}
    assert make_units(ids, 3) == {"batch00000": ["s0", "s1", "s2"], "batch00001": ["s3", "s4", "s5"],
                                  "batch00002": ["s6"]}
    longer = make_units(ids + ["s7", "s8"], 3)
    assert {u: longer[u] for u in ["batch00000", "batch00001"]} == {
        u: s for u, s in make_units(ids, 3).items() if len(s) == 3}


def planned_units(n_sources: int) -> int:
    """Units ``auto`` gives to the tests' Snakemake: its CPUs are the slots (not --cores)."""
    per = min(AUTO_MAX, math.ceil(n_sources / slots()))
    return math.ceil(n_sources / per)


@pytest.mark.parametrize("n_sources", [10, 10_000])
def test_auto_dry_run_plans_one_job_per_unit_and_stage(tmp_path, n_sources):
    # URLs only (nothing local to declare); a dry run plans without downloading
    rows = "".join(f"s{i:05d}\thttp://127.0.0.1:9/s{i:05d}.mp4\tr\n" for i in range(n_sources))
    wd = make_workdir(tmp_path, sources="source_id\turl\tclip_type\n" + rows, config={"sources_per_job": "auto"})
    units = planned_units(n_sources)
    expected = {**{stage: units for stage in PER_UNIT}, **ONCE}
    assert dry_run_jobs(wd) == expected
    # on the 2-CPU test machine: 2 units (36 jobs) for 10 sources, 200 units (2,214 jobs) for 10^4
    if slots() == 2:
        assert sum(expected.values()) == {10: 36, 10_000: 2214}[n_sources]
    if n_sources == 10:  # --cores does not re-plan the units, so a re-run keeps every result
        assert dry_run_jobs(wd, "--cores", "1") == expected


def test_the_units_stage_writes_the_plan_and_removes_the_paths_of_units_not_in_it(tmp_path, monkeypatch):
    from microg4m.formats.unit_plan import read_plan
    from microg4m.stages import units

    monkeypatch.chdir(tmp_path)
    res = Path("results")
    for p in ["clips/batch00000/a_000.mp4", "clips/old/b_000.mp4", "frames/old/b_000/b_000_000001.jpg",
              "frames/old.tsv", "logs/detect/old.log", "download/old.tsv", "download/settings.json",
              "download/videos/old.mp4", "frames/batch00000.tsv"]:
        (res / p).parent.mkdir(parents=True, exist_ok=True)
        (res / p).write_text("x")
    plan = {"batch00000": ["a", "b"]}
    patterns = ["results/clips/{unit}", "results/frames/{unit}", "results/frames/{unit}.tsv",
                "results/logs/detect/{unit}.log", "results/download/{unit}.tsv"]
    removed = units.run(res / "units.tsv", plan, patterns)
    assert sorted(map(str, removed)) == ["results/clips/old", "results/download/old.tsv", "results/frames/old",
                                         "results/frames/old.tsv", "results/logs/detect/old.log"]
    left = sorted(str(p.relative_to(res)) for p in res.rglob("*") if p.is_file())
    assert left == ["clips/batch00000/a_000.mp4", "download/settings.json", "download/videos/old.mp4",
                    "frames/batch00000.tsv", "units.tsv"]
    assert read_plan(res / "units.tsv") == plan
    with pytest.raises(ValueError, match="not a per-unit path"):
        units.orphans(["results/{name}/{unit}"], plan)


def job_resources(proc) -> dict[str, set[str]]:
    """Rule -> the `gpu=` values of its jobs, from a dry run's job listing."""
    out: dict[str, set[str]] = {}
    rule = None
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.match(r"^(?:local)?rule (\w+):", line.strip())
        if m:
            rule = m.group(1)
        m = re.search(r"resources: .*\bgpu=(\d+)", line)
        if m and rule:
            out.setdefault(rule, set()).add(m.group(1))
    return out


def test_only_jobs_that_use_a_gpu_take_the_gpu_resource(tmp_path):
    """detector and detect on a GPU; track only with a ReID model on a GPU (track.device),
    never for BoT-SORT alone, which runs on the CPU; scenes only with TransNetV2 (it runs
    where detect runs), never for PySceneDetect."""
    rows = "".join(f"s{i}\thttp://127.0.0.1:9/s{i}.mp4\tr\n" for i in range(4))
    wd = make_workdir(tmp_path, sources="source_id\turl\tclip_type\n" + rows,
                      config={"sources_per_job": "auto", "detect": {"device": "cuda:0"}})
    got = job_resources(snakemake(wd, "-n"))
    assert got["detect"] == got["detector"] == {"1"} and got["track"] == got["scenes"] == {"0"}
    set_config(wd, "track", tracker="boxmot", reid_weights="reid.pt", device="cpu")
    assert job_resources(snakemake(wd, "-n"))["track"] == {"0"}  # a ReID model on the CPU
    set_config(wd, "track", device="cuda")
    assert job_resources(snakemake(wd, "-n"))["track"] == {"1"}
    set_config(wd, "scenes", detector="transnetv2")
    assert job_resources(snakemake(wd, "-n"))["scenes"] == {"1"}
    set_config(wd, "detect", device="cpu")
    assert job_resources(snakemake(wd, "-n"))["scenes"] == {"0"}
