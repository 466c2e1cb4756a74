"""Re-runs under one source per job (``sources_per_job: 1``, the extra case; every row of
docs/running.md's re-run table is tested on the default path in tests/test_rerun_table.py).

One real demo run (two sources; a failing download is tests/test_bad_inputs.py's and
tests/test_default_path.py's) is shared by the tests of this
module: the demo's labels reach every training file, CVAT corrections and a label edit
re-run only what follows them (the dry run's job list, then a real run of the same jobs),
and the report. The run uses the
config key ``ffmpeg``: a wrapper around the pinned binary that logs its calls and names
itself in ``-version``, so that the tests see which jobs ran which ffmpeg.
"""

import base64
import io
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import imageio_ffmpeg
import numpy as np
import pandas as pd
import pytest

import loaders
from workflow import dry_run_jobs, jobs_ran, make_workdir, snakemake

SOURCES = "source_id\turl\tclip_type\ndancer\tresources/demo/dancer.mp4\tr\n" \
          "scenecut\tresources/demo/scenecut.mp4\tr\n"


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
                      config={"sources_per_job": 1, "download": {"retries": 1}, "detect": {"imgsz": 320},
                              "ffmpeg": str(ffmpeg_wrapper(base / "bin"))})
    snakemake(wd)
    assert dry_run_jobs(wd) == {}, "a finished run has nothing left to do"
    return wd


def rerun(wd, expected):
    planned = dry_run_jobs(wd)
    assert planned == expected
    assert jobs_ran(snakemake(wd)) == expected
    assert dry_run_jobs(wd) == {}


TRAINING_FILES = ["ava_format_with_header.csv", "ava_format.csv", "ava_train.csv",
                  "ava_test_gt.csv", "ava_test_predicted_boxes.csv",
                  "ava_train_dense_proposals.pkl", "ava_test_dense_proposals.pkl",
                  "label_map.pbtxt", "frame_lists/train.csv", "frame_lists/val.csv", "frame_lists/test.csv",
                  "statistics/action_result_all.csv", "statistics/split_result.csv", "label_report.tsv"]
# 4 labelled clips split 2 / 0 / 2: the empty val split gets no AVA files, a warning instead
EMPTY_VAL_FILES = ["ava_val_gt.csv", "ava_val_predicted_boxes.csv", "ava_val_dense_proposals.pkl"]


def test_0_demo_labels_give_every_training_file_and_they_load(run_dir, monkeypatch):
    """The demo's labels (annotations/demo_actions.csv) reach the AVA files, and every
    non-empty split loads in the reference's PySlowFast parser and in mmaction2."""
    out = run_dir / "results" / "export"
    for name in TRAINING_FILES:
        assert (out / name).is_file(), name
    for name in EMPTY_VAL_FILES:
        assert not (out / name).exists(), name
    problems = pd.read_csv(out / "label_report.tsv", sep="\t", dtype=str, keep_default_na=False)
    warnings = problems.problem.str.startswith("split ")
    assert warnings.sum() == 1 and problems.problem[warnings].iloc[0].startswith("split val:")
    # scenecut opens with the dancer footage, pillarboxed: a near-duplicate; in clip mode each
    # such pair in two splits is a warning (docs/duplicates.md)
    leaks = problems.problem.str.startswith("near-duplicate clips in two splits: dancer_")
    pairs = pd.read_csv(out / "duplicates.tsv", sep="\t", keep_default_na=False)
    assert set(zip(pairs.source_a, pairs.source_b)) == {("dancer", "scenecut")}
    assert leaks.sum() == (pairs.decision == "crosses splits").sum() > 0
    assert all(re.fullmatch(r"unknown clip '(pianist|zidane|carphone)_\d+' \(in no manifest\)", p)
               for p in problems.problem[~warnings & ~leaks])  # every label of this run's clips is used; the rest are other demo sources'
    labelled = {line.split(",")[0] for line in (out / "ava_format.csv").read_text().splitlines()}
    assert labelled == {"dancer_000", "dancer_001", "dancer_002", "scenecut_000"}
    # The demo's persons are seen all clip long at low motion: stamp 52, as for 274 of the
    # 300 released rows (sightings at refreshes 5, 10, 15: recorded from frame 15 to 90).
    motion = pd.concat(pd.read_csv(p, sep="\t") for p in (run_dir / "results" / "motion").glob("*.tsv"))
    assert set(motion.level) == {"low"}
    boxes = pd.read_csv(out / "boxes.csv")
    assert set(boxes.video_id) == labelled and set(boxes.frame_stamp) == {52}
    non_empty = [s for s, f in loaders.SPLIT_FILES.items() if (out / f).is_file()]
    assert "train" in non_empty and "test" in non_empty  # 4 clips: 2 / 0 / 2
    for split in non_empty:
        assert loaders.pyslowfast_split(out, out / "frames", split)  # the export's frame root
    monkeypatch.chdir(run_dir)
    datasets = loaders.mmaction2_datasets(run_dir)
    assert sorted(datasets) == sorted(non_empty)  # val dropped by the config: no ava_val_gt.csv
    for split, (ds, pipeline) in datasets.items():
        for i in range(len(ds)):
            got = loaders.mmaction2_sample(ds, pipeline, i, run_dir)
            assert all(f.is_file() for f in got["files"]), split
        assert tuple(ds[0]["inputs"].shape[:2]) == (3, 32)


# ---------------------------------------------------------------- CVAT corrections


def cvat_like(box_el, frame: int, box, *, keyframe: bool, outside: bool = False, person_id: str):
    """A <box> of CVAT's export: frame 0-based, the person_id attribute on every box."""
    box_el.attrib.update(frame=str(frame), outside=str(int(outside)), occluded="0", keyframe=str(int(keyframe)),
                         xtl=f"{box[0]:.2f}", ytl=f"{box[1]:.2f}", xbr=f"{box[2]:.2f}", ybr=f"{box[3]:.2f}",
                         z_order="0")
    ET.SubElement(box_el, "attribute", {"name": "person_id"}).text = person_id


def reinterpolate(track) -> None:
    """Rewrite a track's in-between boxes as CVAT's export does: linear between keyframes."""
    boxes = sorted(track.findall("box"), key=lambda b: int(b.get("frame")))
    keys = [b for b in boxes if b.get("keyframe") == "1"]
    coords = ("xtl", "ytl", "xbr", "ybr")
    for k0, k1 in zip(keys, keys[1:]):
        f0, f1 = int(k0.get("frame")), int(k1.get("frame"))
        a, b = (np.array([float(k.get(c)) for c in coords]) for k in (k0, k1))
        for el in boxes:
            f = int(el.get("frame"))
            if f0 < f < f1 and k0.get("outside") == "0":
                for c, v in zip(coords, a + (b - a) * (f - f0) / (f1 - f0)):
                    el.set(c, f"{v:.2f}")


def test_0b_cvat_corrections_rerun_only_their_source_and_the_export_shows_exactly_them(run_dir):
    res, ann = run_dir / "results", run_dir / "annotations" / "corrections"
    boxes_before = pd.read_csv(res / "export" / "boxes.csv", dtype={"video_id": str})
    tracks_before = {p.name: p.read_bytes() for p in (res / "tracks").glob("*.csv")}
    assert (res / "corrected" / "dancer.csv").read_bytes() == tracks_before["dancer.csv"]  # no corrections yet
    mot = (res / "mot" / "dancer" / "dancer_001.txt").read_text().splitlines()
    assert mot and all(len(line.split(",")) == 10 and line.endswith(",-1,-1,-1") for line in mot)
    kf = boxes_before.set_index(["video_id", "person_id"])
    manifest = pd.read_csv(res / "clips" / "dancer" / "manifest.tsv", sep="\t").set_index("clip_id")
    w, h = int(manifest.at["dancer_001", "width"]), int(manifest.at["dancer_001", "height"])

    # as in CVAT: dancer_001: move person 1's box on its AVA keyframe, draw a new person on frames 30..60;
    # dancer_002: delete the only track. CVAT renames nothing but the task and renumbers tracks.
    tree = ET.parse(res / "cvat" / "dancer" / "dancer_001.xml")
    root = tree.getroot()
    root.find("meta/task/name").text = "dancer 001, checked by Ana"
    stamp = int(kf.loc[("dancer_001", 1), "frame_stamp"])
    track = root.find("track")
    moved = next(b for b in track.findall("box") if int(b.get("frame")) == stamp - 1)
    new_box = (40.0, 30.0, 240.0, h - 10.0)
    for c, v in zip(("xtl", "ytl", "xbr", "ybr"), new_box):
        moved.set(c, f"{v:.2f}")
    moved.set("keyframe", "1")  # an edited frame becomes a keyframe in CVAT
    reinterpolate(track)
    added = ET.SubElement(root, "track", {"id": "1", "label": "person", "source": "manual"})
    drawn = (300.0, 50.0, 400.0, 300.0)
    for f in range(29, 61):
        cvat_like(ET.SubElement(added, "box"), f, drawn, keyframe=f in (29, 60), person_id="0")
    cvat_like(ET.SubElement(added, "box"), 61, drawn, keyframe=True, outside=True, person_id="0")
    ann.mkdir(exist_ok=True)
    tree.write(ann / "annotations.xml", encoding="utf-8", xml_declaration=True)
    root2 = ET.parse(res / "cvat" / "dancer" / "dancer_002.xml").getroot()
    for t in root2.findall("track"):
        root2.remove(t)
    ET.ElementTree(root2).write(ann / "dancer_002.xml")
    (ann / "broken.xml").write_text("<annotations><version>1.1</vers")  # a corrupt file

    rerun(run_dir, {"track_files": 1, "export": 1, "ledger": 1, "all": 1})  # never detect
    report = pd.read_csv(res / "corrected" / "dancer.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert report[["clip_id", "status", "persons_after"]].values.tolist() == [
        ["dancer_001", "applied", "2"], ["dancer_002", "applied", "0"]]
    inputs = (res / "export" / "input_report.tsv").read_text()
    assert "annotations/corrections/broken.xml\t\tnot XML" in inputs
    assert "dancer_002\tkept clip without any recorded person" in inputs
    assert {p.name: p.read_bytes() for p in (res / "tracks").glob("*.csv")} == tracks_before  # track did not run

    after = pd.read_csv(res / "export" / "boxes.csv", dtype={"video_id": str}).set_index(["video_id", "person_id"])
    want = kf.drop(index=[("dancer_002", 1)]).copy()
    want.loc[("dancer_001", 1), ["xmin", "ymin", "xmax", "ymax"]] = np.round(
        np.clip(np.array(new_box) / [w, h, w, h], 0, 1), 3)
    want.loc[("dancer_001", 2), :] = [45, *np.round(np.array(drawn) / [w, h, w, h], 3)]  # frames 30..61: median 45
    pd.testing.assert_frame_equal(after.sort_index(), want.astype(after.dtypes.to_dict()).sort_index())
    ava = pd.read_csv(res / "export" / "ava_format_with_header.csv", dtype={"video_id": str})
    assert "dancer_002" not in set(ava.video_id)  # its label is reported: the person has no box now
    assert "person 1 has no box in dancer_002" in (res / "export" / "label_report.tsv").read_text()
    ledger = pd.read_csv(res / "ledger.tsv", sep="\t", dtype=str, keep_default_na=False).set_index("clip_id")
    assert ledger.at["dancer_001", "track"] == "2" and ledger.at["dancer_002", "track"] == "0"
    # the CLI's ledger reads the corrected tracks too (from tracks/ it would count 1 and 1 persons); it
    # has no sources table, so its sources come in name order
    out = subprocess.run([sys.executable, "-m", "microg4m.cli", "ledger", str(res)],
                         capture_output=True, text=True, check=True).stdout
    cli = pd.read_csv(io.StringIO(out), sep="\t", dtype=str, keep_default_na=False).set_index("clip_id")
    by_source = ["source_id", "level", "clip_id"]
    pd.testing.assert_frame_equal(cli.reset_index().sort_values(by_source, kind="stable", ignore_index=True),
                                  ledger.reset_index().sort_values(by_source, kind="stable", ignore_index=True))
    out_xml = ET.parse(res / "cvat" / "dancer" / "dancer_001.xml").getroot()
    assert len(out_xml.findall("track")) == 2  # the files out follow the corrections

    for p in ann.glob("*.xml"):  # taking the corrections back restores the tracker's boxes
        p.unlink()
    rerun(run_dir, {"track_files": 1, "export": 1, "ledger": 1, "all": 1})
    assert (res / "corrected" / "dancer.csv").read_bytes() == tracks_before["dancer.csv"]
    pd.testing.assert_frame_equal(pd.read_csv(res / "export" / "boxes.csv", dtype={"video_id": str}), boxes_before)


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


def test_d_actions_edit_reruns_export_only(run_dir):
    boxes = pd.read_csv(run_dir / "results" / "export" / "boxes.csv", dtype={"video_id": str})
    clip, person = boxes.video_id.iloc[0], int(boxes.person_id.iloc[0])
    (run_dir / "annotations" / "demo_actions.csv").write_text(  # the demo config's labels
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
                 "action_distribution.png", "persons_per_clip.png", "provenance.tsv", "datasheet.md"):
        assert name in html, name
    assert f"ffmpeg\t{WRAPPER_VERSION}\n" in report_file(html, "versions.tsv")
    assert "yt-dlp set-up\tready for YouTube\n" in report_file(html, "versions.tsv")
    assert "## Composition" in report_file(html, "datasheet.md")
    assert report_file(html, "provenance.tsv").startswith("source_id\tstatus\treason\t")
    # one labelled clip (test_d): val and test are empty, said in the report and the log
    labels = report_file(html, "label_report.tsv")
    for split in ("val", "test"):
        assert f"\t\tsplit {split}: no clip: 1 clip(s) at ratios 0.7:0.1:0.2 give train 1" in labels
        assert f"ava_{split}_gt.csv and ava_{split}_predicted_boxes.csv not written" in labels
        assert f"export.split\t{split}\tno clip" in report_file(html, "input_report.tsv")
        assert f"export: export.split: {split}: no clip" in (run_dir / "results" / "logs" / "export.log").read_text()
        assert not (run_dir / "results" / "export" / f"ava_{split}_gt.csv").exists()
