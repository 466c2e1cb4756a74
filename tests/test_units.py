"""Job units (``sources_per_job``): the rule itself, the jobs a real dry run plans under
``auto`` for 10 and for 10^4 sources, and units balanced by work that re-runs keep."""

import math
import re
import subprocess
from pathlib import Path

import imageio_ffmpeg
import pytest

from microg4m.common import media
from microg4m.common.units import AUTO_MAX, CLIP_FRAMES, DEFAULT_FRAMES, loads, make_units, per_job, plan, spread
from microg4m.formats.unit_plan import read_frames, read_plan
from workflow import dry_run_jobs, make_workdir, set_config, slots, snakemake

# the stages that run one job per unit; the others run once
PER_UNIT = ["download", "trim", "scenes", "detect", "filter", "motion", "track", "frames", "track_files",
            "signatures"]
ONCE = {"detector": 1, "versions": 1, "duplicates": 1, "duplicate_sheets": 1, "export": 1, "ledger": 1, "all": 1,
        "cache": 4, "download_settings": 1, "units": 1}


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
    # on the 2-CPU test machine: 2 units (33 jobs) for 10 sources, 200 units (2,013 jobs) for 10^4
    if slots() == 2:
        assert sum(expected.values()) == {10: 33, 10_000: 2013}[n_sources]
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
    never for BoT-SORT alone, which runs on the CPU."""
    rows = "".join(f"s{i}\thttp://127.0.0.1:9/s{i}.mp4\tr\n" for i in range(4))
    wd = make_workdir(tmp_path, sources="source_id\turl\tclip_type\n" + rows,
                      config={"sources_per_job": "auto", "detect": {"device": "cuda:0"}})
    got = job_resources(snakemake(wd, "-n"))
    assert got["detect"] == got["detector"] == {"1"} and got["track"] == {"0"}
    set_config(wd, "track", tracker="boxmot", reid_weights="reid.pt", device="cpu")
    assert job_resources(snakemake(wd, "-n"))["track"] == {"0"}  # a ReID model on the CPU
    set_config(wd, "track", device="cuda")
    assert job_resources(snakemake(wd, "-n"))["track"] == {"1"}


# ---------------------------------------------------------------- units balanced by work

LENGTHS = [4, 7, 10, 16, 25, 40, 55, 80, 110, 150]  # seconds: 1 to 50 clips


def changed(before: dict, after: dict) -> set[str]:
    """The units whose sources differ between two plans (new, gone or another list)."""
    return {u for u in set(before) | set(after) if before.get(u) != after.get(u)}


def test_auto_packs_longest_first_and_an_appended_source_re_plans_one_unit():
    ids = [f"s{i}" for i in range(len(LENGTHS))]
    frames = {s: (d // 3) * CLIP_FRAMES for s, d in zip(ids, LENGTHS)}
    units = plan(ids, "auto", 2, frames=frames)
    assert len(units) == 2 and sorted(s for v in units.values() for s in v) == sorted(ids)
    assert spread(units, frames) <= 0.15
    assert spread(make_units(ids, 5), frames) > 0.5  # consecutive batches: 19 clips against 143
    assert plan(ids, "auto", 2, frames=frames, previous=units) == units  # a re-run plans the same
    for new, length in [("late", 3 * CLIP_FRAMES), ("long", 60 * CLIP_FRAMES), ("unknown", None)]:
        more = plan(ids + [new], "auto", 2, frames={**frames, new: length}, previous=units)
        assert len(changed(units, more)) == 1
        light = min(units, key=loads(units, frames).get)
        assert more[light] == sorted(units[light] + [new], key=(ids + [new]).index)
    # more sources than fit the units: a new unit, the others untouched
    many = [f"m{i}" for i in range(2 * AUTO_MAX)]  # two full units on 2 CPUs
    full = plan(many, "auto", 2)
    grown = plan(many + ["x"], "auto", 2, previous=full)
    assert len(full) == 2 and changed(full, grown) == {"batch00002"} and grown["batch00002"] == ["x"]
    # a removed source leaves every other source in its unit
    fewer = plan(ids[1:], "auto", 2, frames=frames, previous=units)
    assert {u: [s for s in v if s != "s0"] for u, v in units.items()} == fewer
    # an integer keeps consecutive batches; unknown lengths count as the median (or the default)
    assert plan(ids, 5, 2, frames=frames, previous=units) == make_units(ids, 5)
    assert plan(["a", "b", "c"], "auto", 2) == {"batch00000": ["a", "b"], "batch00001": ["c"]}
    assert plan(list("abcde"), "auto", 2, frames={"a": 90, "e": 90}) == {"batch00000": ["a", "b", "c"],
                                                                         "batch00001": ["d", "e"]}
    # c and d as the median, 495: a | c, d | then b onto a's unit
    assert plan(list("abcd"), "auto", 2, frames={"a": 900, "b": 90}) == {"batch00000": ["a", "b"],
                                                                         "batch00001": ["c", "d"]}
    assert DEFAULT_FRAMES == 10 * CLIP_FRAMES


def video(path: Path, seconds: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-f", "lavfi", "-i",
                    f"testsrc=size=64x48:rate=30:duration={seconds}", "-c:v", "libx264", "-preset", "ultrafast",
                    "-pix_fmt", "yuv420p", str(path)], check=True)


ESTIMATE = re.compile(r"units: (\d+) \(sources_per_job: auto\), estimated frames per unit min (\d+) max (\d+)")


@pytest.mark.skipif(slots() < 2, reason="one CPU: one unit")
def test_ten_local_sources_of_very_different_lengths_end_together_and_re_runs_keep_the_units(tmp_path):
    """A real dry run estimates the units' frames from the files; the units rule writes
    them; a re-run plans nothing; an appended source re-plans one unit."""
    wd = tmp_path / "wd"
    names = [f"len{d:03d}" for d in LENGTHS]
    for name, seconds in zip(names, LENGTHS):
        video(wd / "videos" / f"{name}.mp4", seconds)
    table = "source_id\turl\tclip_type\n" + "".join(f"{n}\tvideos/{n}.mp4\tr\n" for n in names)
    make_workdir(wd, sources=table, config={"sources_per_job": "auto"})
    dry = snakemake(wd, "-n")
    count, least, most = map(int, ESTIMATE.search(dry.stdout + dry.stderr).groups())
    assert count == 2 and (most - least) / most <= 0.15, (least, most)
    assert "0 of 10 sources planned without a known length" in dry.stdout + dry.stderr
    snakemake(wd, "results/units.tsv")
    units, frames = read_plan(wd / "results" / "units.tsv"), read_frames(wd / "results" / "units.tsv")
    for name in names:  # the clips' frames, by ffmpeg's reading of the file
        assert frames[name] == int(media.probe(wd / "videos" / f"{name}.mp4").duration // 3) * CLIP_FRAMES
    assert sorted(loads(units, frames).values()) == [least, most]
    assert dry_run_jobs(wd, "results/units.tsv") == {}  # the same plan from the same inputs
    assert "units" not in dry_run_jobs(wd)
    video(wd / "videos" / "late.mp4", 20)
    (wd / "config" / "sources.tsv").write_text(table + "late\tvideos/late.mp4\tr\n")
    snakemake(wd, "results/units.tsv")
    after = read_plan(wd / "results" / "units.tsv")
    assert len(after) == 2 and len(changed(units, after)) == 1
    (unit,) = changed(units, after)
    assert after[unit] == units[unit] + ["late"] and unit == min(units, key=loads(units, frames).get)
