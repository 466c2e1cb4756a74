"""Stage-only re-runs: after each kind of edit Snakemake runs exactly the stages that follow it.

One real demo run (three sources, one of them failing) is shared by the tests of this
module; each test edits one thing, checks the dry run's job list, runs for real and
checks that the real run ran the same jobs and changed what it should. The run uses the
config key ``ffmpeg``: a wrapper around the pinned binary that logs its calls and names
itself in ``-version``, so that the tests see which jobs ran which ffmpeg.
"""

import base64
import re

import imageio_ffmpeg
import pandas as pd
import pytest

from workflow import dry_run_jobs, jobs_ran, make_workdir, set_config, snakemake

SOURCES = "source_id\turl\tclip_type\ndancer\tresources/demo/dancer.mp4\tr\n" \
          "scenecut\tresources/demo/scenecut.mp4\tr\nmissing\thttp://127.0.0.1:9/missing.mp4\tr\n"
UNITS = 3  # sources_per_job 1: one job per source and stage


WRAPPER_VERSION = "ffmpeg version microg4m-test-wrapper"


def ffmpeg_wrapper(folder):
    """An ffmpeg that appends its arguments to ``calls.log`` and runs the pinned binary."""
    folder.mkdir()
    wrapper = folder / "ffmpeg"
    wrapper.write_text(f"""#!/bin/sh
printf '%s\\n' "$*" >> '{folder / "calls.log"}'
case " $* " in *" -version "*) echo '{WRAPPER_VERSION}';; esac
exec '{imageio_ffmpeg.get_ffmpeg_exe()}' "$@"
""")
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("reruns")
    wd = make_workdir(base / "wd", sources=SOURCES,
                      config={"download": {"retries": 1}, "detect": {"imgsz": 320},
                              "ffmpeg": str(ffmpeg_wrapper(base / "bin"))})
    snakemake(wd)
    assert dry_run_jobs(wd) == {}, "a finished run has nothing left to do"
    return wd


def rerun(wd, expected):
    planned = dry_run_jobs(wd)
    assert planned == expected
    assert jobs_ran(snakemake(wd)) == expected
    assert dry_run_jobs(wd) == {}


def decisions(wd):
    return pd.concat(pd.read_csv(p, sep="\t", dtype=str, keep_default_na=False)
                     for p in sorted((wd / "results" / "filter").glob("*.tsv")))


def test_the_ffmpeg_setting_reaches_every_job_that_runs_ffmpeg(run_dir):
    calls = (run_dir.parent / "bin" / "calls.log").read_text().splitlines()
    wrapper = run_dir.parent / "bin" / "ffmpeg"
    assert any(re.search(r" -f mp4 \S*resources/demo/\S*dancer", c) for c in calls), "demo_media"
    assert any("-f segment" in c for c in calls), "trim"
    assert any("-f image2" in c for c in calls), "frames"
    for log in ["resources/demo/logs/dancer", "results/logs/trim/dancer", "results/logs/frames/dancer",
                "results/logs/track/dancer", "results/logs/versions"]:
        assert f"ffmpeg: {wrapper} ({WRAPPER_VERSION})" in (run_dir / f"{log}.log").read_text(), log
    versions = pd.read_csv(run_dir / "results" / "versions.tsv", sep="\t", dtype=str)
    assert versions.iloc[0].tolist() == ["ffmpeg", WRAPPER_VERSION]
    assert dict(versions.values)["imageio-ffmpeg"] == imageio_ffmpeg.__version__


def test_a_filter_threshold_edit_reruns_filter_and_after_never_detect(run_dir):
    before = decisions(run_dir)
    assert (before.keep == "1").sum() >= 3
    cache = {p: p.stat().st_mtime_ns for p in (run_dir / "results" / "detections").glob("*.parquet")}
    set_config(run_dir, "filter", person_conf=0.999)  # no box is that sure
    rerun(run_dir, {"filter": UNITS, "track": UNITS, "frames": UNITS, "export": 1, "ledger": 1, "all": 1})
    after = decisions(run_dir)
    assert (after.keep == "0").all()
    assert set(after[before.reason == "kept"].reason) == {"few_persons"}
    assert cache == {p: p.stat().st_mtime_ns for p in cache}  # the detection cache was not rewritten
    set_config(run_dir, "filter", person_conf=0.6)
    rerun(run_dir, {"filter": UNITS, "track": UNITS, "frames": UNITS, "export": 1, "ledger": 1, "all": 1})
    assert decisions(run_dir).equals(before)


def test_a2_screening_reruns_only_the_screened_source(run_dir):
    (run_dir / "annotations" / "screening_excluded.txt").write_text("dancer_001  # not in space\n")
    rerun(run_dir, {"filter": 1, "track": 1, "frames": 1, "export": 1, "ledger": 1, "all": 1})
    dec = decisions(run_dir).set_index("clip_id")
    assert dec.loc["dancer_001", "reason"] == "screened" and dec.loc["dancer_000", "reason"] == "kept"


def test_b_tracker_edit_reruns_track_and_export_only(run_dir):
    set_config(run_dir, "track", box_mode="interpolate")
    rerun(run_dir, {"track": UNITS, "export": 1, "ledger": 1, "all": 1})


def test_c_weights_or_imgsz_edit_reruns_detect(run_dir):
    set_config(run_dir, "detect", imgsz=256)
    rerun(run_dir, {"detect": UNITS, "filter": UNITS, "track": UNITS, "frames": UNITS,
                    "export": 1, "ledger": 1, "all": 1})


def test_d_actions_edit_reruns_export_only(run_dir):
    boxes = pd.read_csv(run_dir / "results" / "export" / "boxes.csv", dtype={"video_id": str})
    clip, person = boxes.video_id.iloc[0], int(boxes.person_id.iloc[0])
    (run_dir / "annotations" / "actions.csv").write_text(
        f"video_id,movie_or_real,person_id,action\n{clip},r,{person},12\n{clip},r,{person},17\n")
    rerun(run_dir, {"export": 1, "all": 1})
    ava = pd.read_csv(run_dir / "results" / "export" / "ava_format_with_header.csv", dtype={"video_id": str})
    assert sorted(ava.action_id) == [12, 17] and set(ava.video_id) == {clip}


def report_file(html: str, name: str) -> str:
    """The text of a table embedded in the report (a base64 data URI)."""
    m = re.search(r'"filename": "%s",.*?;base64,([A-Za-z0-9+/=]+)' % re.escape(name), html)
    assert m, f"{name} is not in the report"
    return base64.b64decode(m.group(1)).decode("utf-8")


def test_e_report_has_funnel_contact_sheets_plots_versions_and_export_warnings(run_dir):
    report = run_dir / "report.html"
    snakemake(run_dir, "--report", str(report))
    html = report.read_text(encoding="utf-8", errors="replace")
    assert len(html) > 100_000  # self-contained: the images are embedded
    for name in ("funnel.tsv", "funnel.png", "ledger.tsv", "dancer.png", "scenecut.png",
                 "action_distribution.png", "persons_per_clip.png"):
        assert name in html, name
    assert f"ffmpeg\t{WRAPPER_VERSION}\n" in report_file(html, "versions.tsv")
    # one labelled clip (test_d): val and test are empty, said in the report and the log
    labels = report_file(html, "label_report.tsv")
    for split in ("val", "test"):
        assert f"\t\tsplit {split}: no clip: 1 clip(s) at ratios 0.7:0.1:0.2 give train 1" in labels
        assert f"ava_{split}_gt.csv and ava_{split}_predicted_boxes.csv not written" in labels
        assert f"export.split\t{split}\tno clip" in report_file(html, "input_report.tsv")
        assert f"export: export.split: {split}: no clip" in (run_dir / "results" / "logs" / "export.log").read_text()
        assert not (run_dir / "results" / "export" / f"ava_{split}_gt.csv").exists()
