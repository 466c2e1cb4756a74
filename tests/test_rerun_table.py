"""docs/running.md's re-run table, row by row, on the default path (``sources_per_job:
auto``, units of several sources), and the outputs Snakemake owns.

One real run of four sources is shared: ``talk_2`` and ``talk`` (a name that starts
another's) first, so that on 2 or 3 CPUs they share a unit, then carphone (a film) and a
download that fails. For each row of the table the test makes the row's
edit, and ``snakemake -n`` must list exactly the row's jobs: each per-unit rule once per
unit the edit reaches, the others once. Then real re-runs: one for the YOLO column (the
detect logs' ``inferred`` counts; with every clip rejected, their frame folders go too),
the versions table after a download setting and a new ffmpeg binary, and, on a copy of
the run, a re-plan of the units (nothing of the earlier plan is left) and
``--delete-all-output`` (nothing of the run's outputs is left).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

import imageio_ffmpeg
import pandas as pd
import pytest
import yaml

from microg4m.formats.manifest import read_manifest
from microg4m.formats.unit_plan import read_plan
from workflow import REPO, dry_run_jobs, jobs_ran, make_workdir, set_config, slots, snakemake

SOURCES = {
    "talk_2": ("resources/demo/dancer.mp4", "r"),
    "talk": ("resources/demo/pianist.mp4", "r"),
    "carphone": ("resources/demo/carphone.mp4", "m"),
    "missing": ("http://127.0.0.1:9/missing.mp4", "r"),
}
CLIPS = {"talk_2": 3, "talk": 2, "carphone": 1, "missing": 0}
# the rules that run one job per unit; the others run once
PER_UNIT = {"download", "trim", "scenes", "motion", "quality", "detect", "filter", "track", "frames", "track_files",
            "signatures", "vqa_draft"}


def table(sources) -> str:
    """A sources table: ``sources`` is a dict source -> (url, clip type), or names of SOURCES."""
    rows = sources if isinstance(sources, dict) else {s: SOURCES[s] for s in sources}
    return "source_id\turl\tclip_type\n" + "".join(f"{s}\t{u}\t{t}\n" for s, (u, t) in rows.items())


def ffmpeg_script(path: Path, note: str) -> Path:
    """An ffmpeg for the config key ``ffmpeg``: the pinned binary behind a script (``note``
    makes another file of it, as a new binary would be)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n# {note}\nexec '{imageio_ffmpeg.get_ffmpeg_exe()}' \"$@\"\n")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("rerun_table")
    wd = make_workdir(base / "wd", sources=table(SOURCES), config={
        "sources_per_job": "auto", "download": {"retries": 1}, "detect": {"imgsz": 320},
        "ffmpeg": str(ffmpeg_script(base / "bin" / "ffmpeg", "first"))})
    snakemake(wd)
    assert dry_run_jobs(wd) == {}, "a finished run has nothing left to do"
    return wd


def plan(wd: Path) -> dict[str, list[str]]:
    return read_plan(wd / "results" / "units.tsv")


def unit_of(wd: Path, source: str) -> str:
    return next(u for u, sids in plan(wd).items() if source in sids)


def test_sources_whose_names_extend_each_other_keep_their_clips_in_one_unit(run_dir):
    units = plan(run_dir)
    assert sum(map(len, units.values())) == len(SOURCES) and len(units) < len(SOURCES)
    unit = unit_of(run_dir, "talk")
    assert unit == unit_of(run_dir, "talk_2"), units  # on 2 or 3 CPUs
    folder = run_dir / "results" / "clips" / unit
    ok = read_manifest(folder / "manifest.tsv").query("status == 'ok'")
    for src in ("talk_2", "talk"):
        clips = sorted(ok.clip_id[ok.source_id == src])
        assert clips == [f"{src}_{i:03d}" for i in range(CLIPS[src])]
        assert all((folder / f"{c}.mp4").is_file() for c in clips)


# ---------------------------------------------------------------- the table


def table_rows() -> list[tuple[str, str, str]]:
    """(you edit, the jobs listed, YOLO) of every row of docs/running.md's re-run table."""
    text = (REPO / "docs" / "running.md").read_text()
    block = text.split("## Re-running after an edit", 1)[1].split("\n\n| you edit |", 1)[1]
    rows = []
    for line in block.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, line
        rows.append(tuple(cells))
    return rows


def listed(cell: str) -> set[str]:
    """The rules a table cell names (notes in parentheses aside)."""
    depth, plain = 0, ""
    for ch in cell:
        depth += ch == "("
        if not depth:
            plain += ch
        depth -= ch == ")" and depth > 0
    return {r.strip() for r in plain.split(",") if r.strip()}


def set_sources(wd: Path, sources) -> None:
    (wd / "config" / "sources.tsv").write_text(table(sources))


def set_config_value(wd: Path, key: str, value) -> None:
    cfg = yaml.safe_load((wd / "config" / "config.yaml").read_text())
    cfg[key] = value
    (wd / "config" / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


class Edit:
    """One row's edit: ``apply(wd)`` makes it, ``undo(wd)`` takes it back; ``units(wd)``
    (after apply): the units it reaches (None: all)."""

    def __init__(self, apply, undo, units=None):
        self.apply, self.undo, self.units = apply, undo, units


def config_edit(section: str, **values) -> Edit:
    saved = {}

    def apply(wd):
        saved["old"] = yaml.safe_load((wd / "config" / "config.yaml").read_text())[section]
        set_config(wd, section, **values)

    return Edit(apply, lambda wd: set_config_value(wd, section, saved["old"]))


def file_edit(path: str, text, units=None) -> Edit:
    """``path`` (in the working directory) written with ``text``; undone: as it was."""
    saved = {}

    def apply(wd):
        f = wd / path
        saved["old"] = f.read_bytes() if f.exists() else None
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text(wd) if callable(text) else text)

    def undo(wd):
        f = wd / path
        if saved["old"] is None:
            f.unlink()
        else:
            f.write_bytes(saved["old"])  # (a new modification time: its readers take the content)

    return Edit(apply, undo, units)


def replace_source(source: str, by: str) -> Edit:
    """The local file of ``source`` replaced by another video (``by``'s)."""
    saved = {}

    def apply(wd):
        path = wd / SOURCES[source][0]
        st = path.stat()
        saved.update(data=path.read_bytes(), times=(st.st_atime_ns, st.st_mtime_ns))
        path.write_bytes((wd / SOURCES[by][0]).read_bytes())

    def undo(wd):
        path = wd / SOURCES[source][0]
        path.write_bytes(saved["data"])
        os.utime(path, ns=saved["times"])

    return Edit(apply, undo, lambda wd: {unit_of(wd, source)})


def correction(wd: Path) -> str:
    """A CVAT export of the run's own first clip of talk (its boxes unchanged)."""
    return (wd / "results" / "cvat" / unit_of(wd, "talk") / "talk_000.xml").read_text()


MORE = {**SOURCES, "talk_3": SOURCES["talk"]}  # a source appended (the pianist once more)


def replanned(wd: Path) -> set[str]:
    """The units whose sources the appended source changes, under auto as the tests'
    Snakemake plans them (the plan on disk kept, the new source packed into one unit)."""
    from microg4m.formats.sources import load_sources
    from microg4m.stages.demo import made_here
    from microg4m.stages.units import plan_for

    before = plan(wd)
    with contextlib.chdir(wd):  # local sources are found from the working directory
        after = plan_for(load_sources("config/sources.tsv"), "auto", slots(), "results", fps=30,
                         imgsz=320, made_here=made_here).units  # the fixture's detect.imgsz
    changed = {u for u in after.keys() | before.keys() if before.get(u) != after.get(u)}
    assert len(changed) == 1, (before, after)  # one source added: one unit changes
    return changed


def drafted(wd: Path) -> None:
    """Captions drafted (a stand-in server, tests/vlm_stub.py) for every kept clip, then a
    draft setting edited."""
    from vlm_stub import StubVLM

    saved_vqa["old"] = yaml.safe_load((wd / "config" / "config.yaml").read_text())["vqa"]
    with StubVLM(model="stub/vlm", api_key=None, frames=4, frame_size=160) as stub:
        set_config(wd, "vqa", draft={**saved_vqa["old"]["draft"], "enabled": True, "url": stub.url,
                                     "model": "stub/vlm", "frames": 4, "frame_size": 160, "api_key_env": None})
        snakemake(wd)
    cfg = yaml.safe_load((wd / "config" / "config.yaml").read_text())
    set_config(wd, "vqa", draft={**cfg["vqa"]["draft"], "temperature": 0.5})


saved_vqa: dict = {}
ffmpeg2 = lambda wd: wd.parent / "bin2" / "ffmpeg"  # noqa: E731

# row (the start of its first cell) -> its edit
EDITS = {
    "`download.format`": config_edit("download", format="bv*[height<=?360]+ba/b[height<=?360]"),
    "another `download` setting": config_edit("download", sleep_interval=1, cookies="cookies.txt"),
    "a local source's file": replace_source("talk_2", by="talk"),
    "`trim`": config_edit("trim", crf=24),
    "`ffmpeg`": Edit(lambda wd: set_config_value(wd, "ffmpeg", str(ffmpeg_script(ffmpeg2(wd), "second"))),
                     lambda wd: set_config_value(wd, "ffmpeg", str(wd.parent / "bin" / "ffmpeg"))),
    "`detect.weights`": config_edit("detect", imgsz=256),
    "`detect.device`": config_edit("detect", device="cpu"),
    "`detect.batch`": config_edit("detect", batch=8),
    "`detect.conf`": config_edit("detect", conf=0.2),
    "`detect.decoder`": config_edit("detect", decoder="cv2"),
    "`detect.skip_rejected`": config_edit("detect", skip_rejected=False),
    "`detect.exact_margin`": config_edit("detect", exact_margin=0.05, exact_all=True),  # at FP32: nothing
    "`scenes`": config_edit("scenes", threshold=41),
    "a filter threshold": config_edit("filter", person_conf=0.7),
    "`annotations/screening_excluded.txt`": file_edit("annotations/screening_excluded.txt", "talk_001\n",
                                                      lambda wd: {unit_of(wd, "talk")}),
    "a quality threshold": config_edit("filter", min_sharpness=1.0),
    "`motion`": config_edit("motion", high_threshold=96),
    "`quality`": config_edit("quality", every=5),
    "a tracker setting": config_edit("track", box_mode="interpolate"),
    "a CVAT export": file_edit("annotations/corrections/talk_000.xml", correction, lambda wd: {unit_of(wd, "talk")}),
    "`annotations/actions.csv`": file_edit("annotations/demo_actions.csv",
                                           "video_id,movie_or_real,person_id,action\ntalk_000,r,1,12\n"),
    "`duplicates.signature`": config_edit("duplicates", signature={"step_s": 0.25}),
    "`duplicates.match`": config_edit("duplicates", match={"min_similarity": 0.95}),
    "a `vqa.draft` setting": Edit(drafted, lambda wd: set_config_value(wd, "vqa", saved_vqa["old"])),
    "`annotations/vqa_reviews.json`": file_edit("annotations/vqa_reviews.json", '{"version": 1, "clips": {}}\n'),
    # the release is built (release.enabled) and a setting of it edited
    "a `release` setting": config_edit("release", enabled=True, version="1.1.0"),
    "the unit plan": Edit(lambda wd: set_sources(wd, MORE), lambda wd: set_sources(wd, SOURCES), replanned),
}


def edit_of(first_cell: str) -> tuple[str, Edit]:
    keys = [k for k in EDITS if first_cell.startswith(k)]
    assert len(keys) == 1, f"no edit (or more than one) for the row {first_cell!r}"
    return keys[0], EDITS[keys[0]]


def test_every_row_has_its_edit_and_every_edit_its_row():
    rows = table_rows()
    assert len(rows) == len(EDITS)
    assert sorted(edit_of(first)[0] for first, _, _ in rows) == sorted(EDITS)


@pytest.mark.parametrize("row", range(len(table_rows())), ids=[r[0][:40] for r in table_rows()])
def test_each_row_lists_exactly_its_jobs(run_dir, row):
    first, jobs, _ = table_rows()[row]
    _, edit = edit_of(first)
    edit.apply(run_dir)
    try:
        reached = edit.units(run_dir) if edit.units else set(plan(run_dir))
        got = dry_run_jobs(run_dir)
    finally:
        edit.undo(run_dir)
    got.pop("all", None)
    want = {rule: (len(reached) if rule in PER_UNIT else 1) for rule in listed(jobs)}
    if "demo_media" in want:  # the demo's videos: one job each
        want["demo_media"] = sum(SOURCES[s][0].startswith("resources/demo/") for s in SOURCES)
    assert got == want, f"row {first!r}"
    if first.startswith("another `download` setting"):  # the case: sleep_interval added
        assert not {"download", "trim", "detect", "track"} & set(got)


# ---------------------------------------------------------------- real re-runs


def inferred(wd: Path) -> dict[str, int]:
    """Frames YOLO ran on in the last detect job of each unit (the rest came from the cache)."""
    out = {}
    for unit in plan(wd):
        counts = re.findall(r"'inferred': (\d+)", (wd / "results" / "logs" / "detect" / f"{unit}.log").read_text())
        out[unit] = int(counts[-1])
    return out


def frame_folders(wd: Path) -> set[str]:
    """The clip folders in the units' frame folders (not Snakemake's marker of a folder output)."""
    return {p.name for unit in plan(wd) for p in (wd / "results" / "frames" / unit).iterdir()
            if not p.name.startswith(".")}


def test_conf_batch_and_a_filter_threshold_run_no_yolo_and_leave_no_frames_of_clips_no_longer_kept(run_dir):
    kept = frame_folders(run_dir)
    assert kept and {p.name for p in (run_dir / "results" / "export" / "frames").iterdir()} <= kept
    set_config(run_dir, "detect", conf=0.2, batch=8)
    set_config(run_dir, "filter", person_conf=0.999)  # no box is that sure: every clip rejected
    ran = jobs_ran(snakemake(run_dir))
    assert ran["detect"] == len(plan(run_dir)) and ran["frames"] == len(plan(run_dir))
    assert set(inferred(run_dir).values()) == {0}
    assert frame_folders(run_dir) == set()
    assert list((run_dir / "results" / "export" / "frames").iterdir()) == []
    set_config(run_dir, "filter", person_conf=0.6)
    snakemake(run_dir)
    assert set(inferred(run_dir).values()) == {0} and frame_folders(run_dir) == kept


def versions(wd: Path) -> dict[str, str]:
    return dict(pd.read_csv(wd / "results" / "versions.tsv", sep="\t", dtype=str).values)


def test_versions_follow_the_download_settings_and_the_ffmpeg_binary(run_dir):
    assert versions(run_dir)["yt-dlp set-up"] == "ready for YouTube"
    set_config(run_dir, "download", cookies="cookies.txt")  # no such file
    assert jobs_ran(snakemake(run_dir)) == {"download_settings": 1, "versions": 1, "all": 1}
    assert "download.cookies 'cookies.txt': no such file" in versions(run_dir)["yt-dlp set-up"]
    (run_dir / "cookies.txt").write_text("# Netscape HTTP Cookie File\n")  # the file appears
    assert dry_run_jobs(run_dir) == {"versions": 1, "all": 1}
    snakemake(run_dir)
    assert versions(run_dir)["yt-dlp set-up"] == "ready for YouTube"
    ffmpeg_script(run_dir.parent / "bin" / "ffmpeg", "first, upgraded")  # another binary, same path
    assert dry_run_jobs(run_dir) == {"versions": 1, "all": 1}


def test_a_re_plan_leaves_nothing_of_the_earlier_plan_and_delete_all_output_leaves_no_output(run_dir, tmp_path):
    wd = tmp_path / "wd"
    shutil.copytree(run_dir, wd, symlinks=True)
    res = wd / "results"
    old = plan(wd)
    set_sources(wd, ["talk_2", "talk"])  # auto on 2 CPUs: one source per unit, named by it
    snakemake(wd)
    new = plan(wd)
    assert set(new) & set(old) == set() or len(os.sched_getaffinity(0)) > 2
    gone = sorted(str(p.relative_to(res)) for p in res.rglob("*") if any(u in p.name for u in set(old) - set(new)))
    assert gone == [], gone
    assert sorted(p.name for p in (res / "clips").iterdir()) == sorted(new)
    assert sorted(p.name for p in (res / "frames").iterdir() if p.is_dir()) == sorted(new)
    assert set(inferred(wd).values()) == {0}  # the same clips: every box from the frame cache

    snakemake(wd, "--delete-all-output")
    left = sorted(str(p.relative_to(res)) for p in res.rglob("*") if p.is_file())
    # Snakemake keeps the logs and benchmarks; vqa/ is the output of a rule this config no
    # longer asks for (the drafts of the vqa.draft row, then turned off), not of this run
    assert [f for f in left if not f.startswith(("logs/", "benchmarks/", "vqa/"))] == [], left
    for folder in ("clips", "frames", "download/videos", "cache/detect", "cache/models", "cache/duplicates"):
        assert not any((res / folder).rglob("*.*")), folder
