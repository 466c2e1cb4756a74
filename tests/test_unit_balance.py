"""Units balanced by work (issue 35, item 2): under ``sources_per_job: auto`` the sources
are packed longest first by their estimated work (frames weighted by the detector's input
size), and a plan is kept across runs, so
that adding a source changes one unit.

The pure packing rule is checked on made-up estimates; the same path runs for real below:
local videos of very different lengths, the durations read while Snakemake builds the
DAG, the dry run's estimate, and the plan the units rule writes before and after a
source is appended."""

from __future__ import annotations

import re
import subprocess

import imageio_ffmpeg
import pytest

from microg4m.common.source_work import frame_weight
from microg4m.common.units import AUTO_MAX, describe, loads, plan
from microg4m.formats.unit_plan import read_plan, source_order
from workflow import make_workdir, snakemake

LENGTHS = [3, 4.5, 6, 9, 12, 18, 27, 36, 54, 81]  # seconds: 27 times longer at the end


def spread(units, frames) -> float:
    load = loads(units, frames)
    return max(load.values()) / min(load.values()) - 1


def test_longest_first_packing_balances_what_consecutive_runs_do_not():
    ids = [f"s{i}" for i in range(10)]
    frames = {s: sec * 30 for s, sec in zip(ids, LENGTHS)}
    units = plan(ids, "auto", 2, frames)
    assert sorted(s for sids in units.values() for s in sids) == sorted(ids) and len(units) == 2
    assert spread(units, frames) <= 0.15
    consecutive = {"a": ids[:5], "b": ids[5:]}  # what auto planned before: 5 and 5 in table order
    assert spread(consecutive, frames) > 1
    for sids in units.values():  # a unit lists its sources in the table's order
        assert sids == sorted(sids, key=ids.index)


def test_a_kept_plan_changes_one_unit_per_added_source_and_plans_itself_again():
    ids = [f"s{i}" for i in range(10)]
    frames = {s: sec * 30 for s, sec in zip(ids, LENGTHS)}
    before = plan(ids, "auto", 2, frames)
    assert plan(ids, "auto", 2, frames, before) == before  # planned again: the same
    after = plan([*ids, "new"], "auto", 2, {**frames, "new": 200}, before)
    changed = {u for u in after.keys() | before.keys() if after.get(u) != before.get(u)}
    assert len(changed) == 1 and "new" in after[changed.pop()]
    # the new source went to the unit with less work
    light = min(loads(before, frames).items(), key=lambda kv: kv[1])[0]
    assert "new" in after[light]
    # removed sources leave their units only
    fewer = plan(ids[1:], "auto", 2, frames, before)
    assert {u for u in before if fewer.get(u) != before[u]} == {u for u, s in before.items() if "s0" in s}


def test_more_sources_than_the_units_hold_open_new_units_and_keep_the_full_ones():
    ids = [f"s{i:03d}" for i in range(100)]
    before = plan(ids, "auto", 2, {})  # 2 units of 50: full
    assert [len(s) for s in before.values()] == [AUTO_MAX, AUTO_MAX]
    after = plan([*ids, "x"], "auto", 2, {}, before)
    assert {u: after[u] for u in before} == before and len(after) == 3 and after["batch00002"] == ["x"]


def test_a_plan_auto_would_not_make_is_planned_anew():
    ids = [f"s{i}" for i in range(10)]
    each_alone = {s: [s] for s in ids}  # sources_per_job: 1 before
    assert plan(ids, "auto", 2, {}, each_alone) == plan(ids, "auto", 2, {})
    assert len(plan(ids, "auto", 2, {})) == 2
    assert plan(ids, 3, 2, {}) == {"batch00000": ids[:3], "batch00001": ids[3:6], "batch00002": ids[6:9],
                                   "batch00003": ids[9:]}
    assert plan(ids[:2], "auto", 2, {}) == {"s0": ["s0"], "s1": ["s1"]}  # one source per slot


def test_a_frame_weighs_the_pixels_the_detector_runs_on():
    assert frame_weight(640, 640, 640) == 1.0  # square: the whole input
    assert frame_weight(640, 360, 640) == pytest.approx(640 * 384 / 640**2)  # 360 padded to 384
    assert frame_weight(1920, 1080, 640) == frame_weight(640, 360, 640)  # scaled to fit first
    assert frame_weight(1920, 1080, 640, max_height=480) == frame_weight(854, 480, 640)
    assert frame_weight(640, 480, 320) == pytest.approx(320 * 256 / 320**2)


def test_the_balance_line_names_the_units_and_their_spread():
    units = {"batch00000": ["a", "b"], "batch00001": ["c"]}
    line = describe(units, {"a": 100, "b": 110, "c": 200})
    assert "batch00000 210, batch00001 200" in line and "5.0% above" in line
    assert "not known yet: packed by count" in describe(units, {})
    ids = [f"s{i}" for i in range(6)]  # nothing known: runs of the table, as with an integer
    assert plan(ids, "auto", 2, {}) == plan(ids, 3, 2) == {"batch00000": ids[:3], "batch00001": ids[3:]}
    assert "1 of the sources not known yet" in describe(units, {"a": 100, "b": None, "c": 200})


def make_video(path, seconds: float) -> None:
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-f", "lavfi", "-i",
                    f"testsrc=size=64x48:rate=30", "-t", str(seconds), "-c:v", "libx264", "-preset",
                    "ultrafast", "-pix_fmt", "yuv420p", "-y", str(path)], check=True)


BALANCE = re.compile(r"microg4m: (\d+) sources in (\d+) units; estimated work per unit \(frames at the "
                     r"detector's full input size\): (.*); "
                     r"the heaviest ([\d.]+)% above the lightest")


def test_a_dry_run_packs_real_videos_by_their_length_and_a_new_source_changes_one_unit(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    rows = []
    for i, seconds in enumerate(LENGTHS):
        make_video(media / f"v{i}.mp4", seconds)
        rows.append(f"v{i}\t{media / f'v{i}.mp4'}\tr\n")
    wd = make_workdir(tmp_path / "wd", sources="source_id\turl\tclip_type\n" + "".join(rows))
    dry = snakemake(wd, "-n")
    m = BALANCE.search(dry.stderr)
    assert m, dry.stderr[-3000:]
    assert (m.group(1), m.group(2)) == ("10", "2")
    per_unit = [float(x.split()[-1].replace(",", "")) for x in m.group(3).split(", ")]
    # the files' own frames, each 0.75 of one (64x48 scaled to 640x480 of the 640x640 input)
    assert sum(per_unit) == pytest.approx(sum(LENGTHS) * 30 * 0.75, abs=2)
    assert max(per_unit) <= 1.15 * min(per_unit) and float(m.group(4)) <= 15
    snakemake(wd, "results/units.tsv")
    before, work = read_plan(wd / "results" / "units.tsv", with_work=True)
    assert work == {f"v{i}": pytest.approx(s * 30 * 0.75, abs=1) for i, s in enumerate(LENGTHS)}
    make_video(media / "v10.mp4", 20)
    with open(wd / "config" / "sources.tsv", "a") as f:
        f.write(f"v10\t{media / 'v10.mp4'}\tr\n")
    snakemake(wd, "results/units.tsv")
    after = read_plan(wd / "results" / "units.tsv")
    changed = {u for u in after.keys() | before.keys() if after.get(u) != before.get(u)}
    assert len(changed) == 1 and "v10" in after[changed.pop()]


def test_what_the_run_makes_never_changes_the_plan_it_runs(tmp_path, monkeypatch):
    """A new source is estimated only from what the run does not make (a demo video the
    workflow writes, a download), so a run killed before its plan was written plans the
    same units when started again; once planned, its own files refine the estimate."""
    import pandas as pd

    from microg4m.stages import units as stage
    from microg4m.stages.demo import made_here

    monkeypatch.chdir(tmp_path)
    (tmp_path / "resources" / "demo").mkdir(parents=True)
    make_video(tmp_path / "mine.mp4", 6)
    table = pd.DataFrame({"url": ["resources/demo/dancer.mp4", "mine.mp4", "resources/demo/pianist.mp4"]},
                         index=["dancer", "mine", "pianist"])
    size = dict(fps=30, imgsz=640, made_here=made_here)
    before = stage.plan_for(table, "auto", 2, "results", **size)
    make_video(tmp_path / "resources" / "demo" / "dancer.mp4", 12)  # the run made it, then was killed
    again = stage.plan_for(table, "auto", 2, "results", **size)
    assert again == before and before.work["dancer"] is None and before.work["mine"] == pytest.approx(180 * 0.75)
    stage.run("results/units.tsv", before.units, [], before.recorded, list(table.index))
    planned = stage.plan_for(table, "auto", 2, "results", **size)
    assert planned.units == before.units and planned.recorded == before.recorded
    assert planned.work["dancer"] == pytest.approx(360 * 0.75)  # planned now: its file is read
    assert read_plan("results/units.tsv") == before.units
    assert source_order("results/units.tsv") == ["dancer", "mine", "pianist"]  # the table's order
