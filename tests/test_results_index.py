"""The results index (microg4m.formats.results_index): a clip knows its unit.

Real files on disk, written as the workflow writes them (manifest, filter decisions, track
CSVs, the unit plan); the default layout is one unit of several sources (``sources_per_job:
auto``), the layout of one source per job an extra case.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from microg4m.common.atomic import write_text
from microg4m.formats import results_index
from microg4m.formats.decisions import read_decisions
from microg4m.formats.manifest import read_manifest
from microg4m.formats.results_index import WATCHED, ResultsIndex
from microg4m.formats.tracks import read_tracks
from microg4m.formats.unit_plan import read_plan
from test_annotate_store import PER_SOURCE, UNITS, build_results

UNIT = "batch00000"


def snapshot(index: ResultsIndex) -> dict:
    """Everything the index says about the folder's clips: their fields and their persons and boxes."""
    return {cid: (c, index.persons(cid), index.boxes(cid)) for cid, c in index.clips().items()}


def track_file_persons(path) -> dict[str, list[int]]:
    t = read_tracks(path)
    return {c: sorted(set(g["person_id"])) for c, g in t.groupby("video_id")}


@pytest.mark.parametrize("units", [UNITS, PER_SOURCE], ids=["auto", "per-source"])
def test_units_clips_and_the_persons_of_the_track_file(tmp_path, units):
    res = build_results(tmp_path / "results", units=units)
    index = ResultsIndex(res)
    assert index.planned() and index.units() == units
    unit_of = {s: u for u, ss in units.items() for s in ss}
    assert {s: index.unit_of(s) for s in unit_of} == unit_of
    clips = index.clips()
    assert list(clips) == ["dancer_000", "dancer_001", "dancer_002", "film_000", "film_001"]
    for cid, c in clips.items():
        assert c.unit == unit_of[c.source_id] and c.path == res / "clips" / c.unit / f"{cid}.mp4"
        assert (c.status, c.frames, c.width, c.height) == ("ok", 90, 320, 306)
    assert [(c.keep, c.reason, c.kept) for c in clips.values()] == [
        (True, "kept", True), (True, "kept", True), (False, "few_persons", False), (True, "kept", True),
        (False, "screened", False)]
    assert clips["film_000"].clip_type == "m" and clips["dancer_000"].clip_type == "r"
    # the persons of each clip are those of its unit's track file
    for unit in units:
        assert index.final_tracks(unit) == res / "tracks" / f"{unit}.csv"
        for cid, persons in track_file_persons(index.final_tracks(unit)).items():
            assert index.clip(cid).unit == unit and index.persons(cid) == persons
    assert index.persons("dancer_000") == [1, 2] and index.persons("dancer_002") == []
    assert index.boxes("dancer_000")[20] == [(1, 40, 40, 150, 280), (2, 180, 60, 300, 290)]
    assert index.track_rows("film_000").shape == (90, 6)
    assert index.problems() == [] and index.leftovers() == []
    assert index.clip_files("film_000").cvat == res / "cvat" / unit_of["film"] / "film_000.xml"
    with pytest.raises(KeyError, match="'nope_000' is no clip"):
        index.clip("nope_000")
    with pytest.raises(KeyError, match="'nope' is no source"):
        index.unit_of("nope")
    assert index.get(None) is None


def earlier_plan_then_current(root):
    """A folder re-planned from one source per job to units of several: the earlier plan's
    clips/dancer/, clips/film/ (whose tracks name other persons) are still there."""
    build_results(root, units=PER_SOURCE, plan=False)
    for src in PER_SOURCE:  # the earlier run's tracker saw person 7 only
        path = root / "tracks" / f"{src}.csv"
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0]] + [",".join(ln.split(",")[:2] + ["7"] + ln.split(",")[3:])
                                                for ln in lines[1:]]) + "\n")
    build_results(root, units=UNITS)
    return root


def test_a_stale_folder_of_an_earlier_plan_never_wins(tmp_path):
    res = earlier_plan_then_current(tmp_path / "results")
    index = ResultsIndex(res)
    assert index.units() == UNITS
    assert all(c.unit == UNIT for c in index.clips().values())
    assert index.persons("dancer_000") == [1, 2] and index.persons("film_000") == [1]
    assert index.leftovers() == [res / "clips" / "dancer", res / "clips" / "film"]
    assert index.problems() == [f"{res / 'clips' / s}: a folder of no unit of {res / 'units.tsv'} "
                                "(left by an earlier plan); ignored" for s in ("dancer", "film")]


def test_without_a_plan_every_manifest_counts_and_a_clip_in_two_is_named(tmp_path):
    res = earlier_plan_then_current(tmp_path / "results")
    (res / "units.tsv").unlink()  # a folder of an older run: no plan
    index = ResultsIndex(res)
    assert not index.planned() and index.units() == {UNIT: ["dancer", "film"], **PER_SOURCE}
    assert index.leftovers() == []
    problems = index.problems()
    assert len(problems) == 5  # every clip is in two manifests
    assert problems[0] == (f"{res / 'clips' / 'dancer' / 'manifest.tsv'}: dancer_000 is also a clip of unit "
                           f"{UNIT} ({res / 'clips' / UNIT / 'manifest.tsv'}); the first kept")
    assert index.clip("dancer_000").unit == UNIT  # the first in folder order


def test_a_changed_track_file_or_decision_is_seen_by_the_next_call(tmp_path):
    res = build_results(tmp_path / "results")
    index = ResultsIndex(res)
    assert index.persons("dancer_000") == [1, 2]
    version = index.version

    tracks = res / "tracks" / f"{UNIT}.csv"  # a re-run of track: person 2 gone
    tracks.write_text("".join(ln + "\n" for ln in tracks.read_text().splitlines()
                              if not (ln.startswith("dancer_000,") and ln.split(",")[2] == "2")))
    assert index.persons("dancer_000") == [1]
    (res / "corrected").mkdir()  # then track_files with a CVAT correction: person 3 added
    corrected = res / "corrected" / f"{UNIT}.csv"
    corrected.write_text(tracks.read_text() + "dancer_000,5,3,1.00,2.00,30.00,40.00,1.0000\n")
    assert index.final_tracks(UNIT) == corrected and index.persons("dancer_000") == [1, 3]
    assert index.boxes("dancer_000")[5] == [(1, 40, 40, 150, 280), (3, 1, 2, 30, 40)]
    assert snapshot(index) == snapshot(ResultsIndex(res))

    decisions = res / "filter" / f"{UNIT}.tsv"  # a re-run of the filter rejects dancer_001
    decisions.write_text(decisions.read_text().replace("dancer_001\t1.0000\t\t1\tkept", "dancer_001\t0.3000\t\t0\tfew_persons"))
    assert (index.clip("dancer_001").keep, index.clip("dancer_001").reason) == (False, "few_persons")
    assert index.version > version
    manifest = res / "clips" / UNIT / "manifest.tsv"  # a new clip appears in the manifest
    manifest.write_text(manifest.read_text() + "dancer_003\tdancer\tr\t3\t9\t90\t320\t306\tok\t\n")
    assert index.clip("dancer_003").keep is None  # no decision yet
    assert snapshot(index) == snapshot(ResultsIndex(res))


def test_a_call_on_one_clip_reads_only_what_changed_in_its_unit(tmp_path, monkeypatch):
    """The cost of a request does not grow with the folder: after the first read, a call on
    one clip reads no file unless one of its unit's files changed, and then only that unit's."""
    res = build_results(tmp_path / "results", units=PER_SOURCE).resolve()
    reads: list[str] = []
    for name in ("read_manifest", "read_decisions", "read_tracks"):
        real = getattr(results_index, name)
        monkeypatch.setattr(results_index, name, lambda path, *a, _real=real, _name=name, **k: (
            reads.append(f"{_name} {path.relative_to(res)}"), _real(path, *a, **k))[1])
    index = ResultsIndex(res)
    assert reads == []  # nothing is read before the first call
    index.persons("dancer_000")
    assert sorted(reads) == ["read_decisions filter/dancer.tsv", "read_decisions filter/film.tsv",
                             "read_manifest clips/dancer/manifest.tsv", "read_manifest clips/film/manifest.tsv",
                             "read_tracks tracks/dancer.csv"]  # the tracks of film: not asked for yet
    reads.clear()
    for _ in range(5):
        index.persons("dancer_000"), index.boxes("dancer_001"), index.clip("dancer_002")
    assert reads == []
    shutil.copy(res / "tracks" / "film.csv", res / "film.csv.bak")
    (res / "tracks" / "film.csv").write_text((res / "film.csv.bak").read_text())  # film's tracks change
    index.persons("dancer_000")
    assert reads == []
    index.persons("film_000")
    assert reads == ["read_tracks tracks/film.csv"]
    reads.clear()
    (res / "filter" / "dancer.tsv").write_text((res / "filter" / "dancer.tsv").read_text())
    index.clip("film_000"), index.clip("dancer_000")
    assert reads == ["read_manifest clips/dancer/manifest.tsv", "read_decisions filter/dancer.tsv"]


def test_what_cannot_be_used_is_named(tmp_path):
    res = build_results(tmp_path / "results", units={UNIT: ["dancer"], "batch00001": ["film"]})
    plan = res / "units.tsv"
    plan.write_text(plan.read_text() + "batch00002\tlater\n")  # a unit not trimmed yet
    (res / "clips" / "batch00001" / "manifest.tsv").write_text("not a manifest\n")
    (res / "tracks" / f"{UNIT}.csv").write_text((res / "tracks" / f"{UNIT}.csv").read_text() + "dancer_000,x,1,1,1,5,5,0.9\n")
    index = ResultsIndex(res)
    assert index.units() == {UNIT: ["dancer"], "batch00001": ["film"], "batch00002": ["later"]}
    assert index.persons("dancer_000") == [1, 2]
    problems = index.problems()
    assert problems[0].startswith(f"{res / 'clips' / 'batch00001' / 'manifest.tsv'}: unreadable manifest")
    assert problems[1] == f"{res / 'clips' / 'batch00002' / 'manifest.tsv'}: not written yet (unit batch00002 of {plan})"
    assert problems[2] == (f"{res / 'tracks' / f'{UNIT}.csv'}: 1 row(s) with a missing or non-numeric value or a "
                           "bad frame/person id; ignored")
    # a manifest row of a source the plan puts in another unit (a re-plan not run yet) is not used
    plan.write_text(f"unit\tsource_id\n{UNIT}\tdancer\nbatch00001\tfilm\n")
    build_results(tmp_path / "other", units={UNIT: ["film"]})
    shutil.copy(tmp_path / "other" / "clips" / UNIT / "manifest.tsv", res / "clips" / "batch00001" / "manifest.tsv")
    shutil.copy(tmp_path / "other" / "clips" / UNIT / "manifest.tsv", res / "clips" / UNIT / "manifest.tsv")
    assert [c for c in index.clips()] == ["film_000", "film_001"]
    assert index.problems()[0] == (f"{res / 'clips' / UNIT / 'manifest.tsv'}: film_000: source 'film' is not of "
                                   f"unit {UNIT} in {plan} (a re-plan not run yet); ignored")
    (res / "tracks" / "batch00001.csv").unlink()  # kept clips without their tracks: named, no person
    assert index.persons("film_000") == []
    assert index.problems()[-1] == (f"{res / 'tracks' / 'batch00001.csv'}: not written yet; the kept clips of "
                                    "unit batch00001 show no person")
    plan.write_text("unit\n")
    with pytest.raises(ValueError, match=f"{plan}: not a unit plan"):
        index.clips()


def test_a_new_plan_is_seen_by_the_next_call_before_the_workflow_ran_it(tmp_path):
    res = build_results(tmp_path / "results")
    index = ResultsIndex(res)
    assert index.clip("film_000").unit == UNIT
    plan = res / "units.tsv"  # the workflow re-plans (more sources): film goes to a unit not trimmed yet
    plan.write_text(f"unit\tsource_id\n{UNIT}\tdancer\nbatch00001\tfilm\n")
    assert index.get("film_000") is None and index.clip("dancer_000").unit == UNIT
    assert index.problems()[:2] == [
        f"{res / 'clips' / UNIT / 'manifest.tsv'}: film_000: source 'film' is not of unit {UNIT} in {plan} "
        "(a re-plan not run yet); ignored",
        f"{res / 'clips' / UNIT / 'manifest.tsv'}: film_001: source 'film' is not of unit {UNIT} in {plan} "
        "(a re-plan not run yet); ignored"]


# ---------------------------------------------------------------- a long-running server's index (max_age)


def fresh_read(root) -> dict[str, tuple]:
    """clip -> (unit, source, trim status, keep, reason, persons), read straight from the
    folder's files with the format readers (the plan; each unit's manifest, decisions and
    final tracks: corrected/ when written), not through the index."""
    out = {}
    for unit, sources in read_plan(root / "units.tsv").items():
        decided = {}
        if (root / "filter" / f"{unit}.tsv").is_file():
            d = read_decisions(root / "filter" / f"{unit}.tsv")
            decided = {c: (k.strip() == "1", r.strip()) for c, k, r in zip(d["clip_id"], d["keep"], d["reason"])}
        tracks = root / "corrected" / f"{unit}.csv"
        tracks = tracks if tracks.is_file() else root / "tracks" / f"{unit}.csv"
        persons = track_file_persons(tracks) if tracks.is_file() else {}
        for r in read_manifest(root / "clips" / unit / "manifest.tsv").itertuples():
            if r.source_id in sources:
                out[r.clip_id] = (unit, r.source_id, r.status, *decided.get(r.clip_id, (None, "")),
                                  persons.get(r.clip_id, []))
    return dict(sorted(out.items()))


def seen(index: ResultsIndex) -> dict[str, tuple]:
    """The same, as the index's view gives it (what the pages list)."""
    view = index.view()
    return {c: (x.unit, x.source_id, x.status, x.keep, x.reason, view.persons(c)) for c, x in view.clips.items()}


def settle(root, index: ResultsIndex) -> None:
    """Let the folders age (as they do between a workflow's runs) and the index take their
    stamps: from now on, only a change of a folder's stamp shows it a change."""
    old = time.time() - 60
    for d in WATCHED:
        if (root / d).exists():
            os.utime(root / d, (old, old))
    index.view()


@pytest.mark.parametrize("units", [UNITS, PER_SOURCE], ids=["auto", "per-source"])
def test_a_servers_index_gives_the_same_clips_and_persons_as_a_fresh_read_of_the_folder(tmp_path, units):
    """A server's index (a look at every unit at most once an hour here: only the folders'
    stamps can show it a change) after each change a re-run of the workflow makes, its files
    written atomically as the workflow writes them."""
    root = build_results(tmp_path / "results", units=units)
    index = ResultsIndex(root, max_age=3600)
    assert seen(index) == fresh_read(root) and len(fresh_read(root)) == 5
    f = index.files(index.clip("dancer_000").unit)
    lines = f.tracks.read_text().splitlines()
    changes = [  # (what, file, its new text)
        ("track: person 2 of dancer_000 gone", f.tracks,
         "".join(ln + "\n" for ln in lines if not (ln.startswith("dancer_000,") and ln.split(",")[2] == "2"))),
        ("CVAT corrections: person 3 in dancer_000", f.corrected,
         "\n".join(lines) + "\ndancer_000,5,3,1.00,2.00,30.00,40.00,1.0000\n"),
        ("filter: dancer_001 rejected", f.decisions,
         f.decisions.read_text().replace("dancer_001\t1.0000\t\t1\tkept", "dancer_001\t0.3000\t\t0\tfew_persons")),
        ("trim: a new clip, no decision yet", f.manifest,
         f.manifest.read_text() + "dancer_003\tdancer\tr\t3\t9\t90\t320\t306\tok\t\n"),
        ("filter: the new clip kept", f.decisions,
         f.decisions.read_text().replace("dancer_001\t1.0000\t\t1\tkept", "dancer_001\t0.3000\t\t0\tfew_persons")
         + "dancer_003\t1.0000\t\t1\tkept\n"),
        ("track of the new clip", f.corrected, "\n".join(lines) + "\ndancer_003,1,4,1.00,2.00,30.00,40.00,1.0000\n"),
    ]
    before = fresh_read(root)
    for what, path, text in changes:
        settle(root, index)
        write_text(path, text)
        after = fresh_read(root)
        if path != f.manifest:  # a manifest's change is under clips/<unit>/: seen with the filter's decisions
            assert after != before, what
            assert seen(index) == after, what
        before = after
    assert before["dancer_003"][3:] == (True, "kept", [4]) and before["dancer_001"][3] is False
    assert seen(index) == fresh_read(root)
    assert {c: index.persons(c) for c in before} == {c: v[-1] for c, v in before.items()}  # one clip: exact


@pytest.mark.parametrize("units", [UNITS, PER_SOURCE], ids=["auto", "per-source"])
def test_a_servers_view_costs_the_same_few_stats_whatever_the_units(tmp_path, units, monkeypatch):
    """Once read, a view of a server's index stats the plan and a few folders, not every unit's files."""
    root = build_results(tmp_path / "results", units=units)
    index = ResultsIndex(root, max_age=3600)
    assert all(seen(index)[c][-1] == index.persons(c) for c in index.clips())  # every unit's tracks read
    settle(root, index)
    stats = []
    real = results_index._stat
    monkeypatch.setattr(results_index, "_stat", lambda path: (stats.append(path), real(path))[1])
    for _ in range(3):
        seen(index)
    assert len(stats) == 3 * (2 + len(WATCHED))  # units.tsv, clips/ and the watched folders
    # a file edited in place (no folder's stamp changes) is seen after max_age; a call on one clip at once
    index.max_age = 0.2
    for clip in ("film_000", "dancer_001"):
        with open(index.files(index.clip(clip).unit).tracks, "a") as out:
            out.write(f"{clip},1,5,1.00,2.00,30.00,40.00,1.0000\n")
    assert index.persons("dancer_001") == [1, 5]
    time.sleep(0.25)
    assert seen(index) == fresh_read(root) and seen(index)["film_000"][-1] == [1, 5]


def test_a_folder_changed_just_before_a_look_is_looked_into_again(tmp_path):
    """Two changes within one tick of a coarse clock leave a folder's stamp as it was: a
    stamp that recent (RACY_SECONDS) is not trusted, the next call looks at every unit."""
    root = build_results(tmp_path / "results")
    index = ResultsIndex(root, max_age=3600)
    assert seen(index) == fresh_read(root)  # the folders were written just now
    before = os.stat(root / "filter")
    decisions = index.files(UNIT).decisions
    write_text(decisions, decisions.read_text().replace("dancer_001\t1.0000\t\t1\tkept",
                                                        "dancer_001\t0.3000\t\t0\tfew_persons"))
    os.utime(root / "filter", ns=(before.st_atime_ns, before.st_mtime_ns))  # as if in the same tick
    assert (results_index._stat(root / "filter") == (before.st_mtime_ns, before.st_size, before.st_ino))
    assert seen(index)["dancer_001"][3:5] == (False, "few_persons") and seen(index) == fresh_read(root)
