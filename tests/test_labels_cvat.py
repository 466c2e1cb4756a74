"""Action labels through CVAT both ways, on the session's demo run (tests/demo_run.py): the
tasks ``microg4m labels export --to cvat`` writes (image-sequence tasks of many clips, their
manifests, the action attributes), their exports read back by ``microg4m labels import``
into an empty actions file, and the export made from it; Datumaro (its own CVAT importer,
in its own environment: tests/tool_envs.py) loads the task files; bad input is reported
with file, clip, person and reason while the rest goes on; a bulk task set for 100 units."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest

from demo_run import RESULTS, demo_copy
from tool_envs import run_in
from workflow import REPO

from microg4m.formats import cvat, cvat_tasks
from microg4m.formats.results_index import ResultsIndex

AVA_FILES = ["ava_format_with_header.csv", "ava_format.csv", "ava_train.csv", "ava_test_gt.csv",
             "ava_test_predicted_boxes.csv"]
WAVE = "hand wave"  # action 69, a person interaction: a yes/no box


def cli(wd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``microg4m`` in the demo's folder with this checkout's code, on the demo's config."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "microg4m.cli", *args], cwd=wd, env=env, capture_output=True,
                          text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"microg4m {' '.join(args)}: {proc.stderr[-4000:]}")
    return proc


def labels(wd: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return cli(wd, "labels", *args, "--configfile", ".test/demo/config.yaml", **kw)


def ava_export(wd: Path, actions: Path, out: Path) -> Path:
    cli(wd, "export", RESULTS, str(out), "--actions", str(actions))
    return out


def as_cvat_export(xml: bytes, path: Path) -> Path:
    """A task's annotations as CVAT's "Export task dataset" gives them: a zip with annotations.xml."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("annotations.xml", xml)
    return path


def track_of(root: ET.Element, first_frame: int, person: int) -> ET.Element:
    """The track of a person of the clip that starts at task frame ``first_frame``."""
    for t in root.findall("track"):
        boxes = t.findall("box")
        pid = boxes[0].find("attribute[@name='person_id']").text
        if int(pid) == person and int(boxes[0].get("frame")) >= first_frame and \
                int(boxes[0].get("frame")) < first_frame + 90:
            return t
    raise AssertionError(f"no track of person {person} from frame {first_frame}")


def at_keyframe(track: ET.Element) -> ET.Element:
    """The box of the track's AVA keyframe (its ``ava_keyframe`` attribute)."""
    key = track.find("box/attribute[@name='ava_keyframe']").text
    return next(b for b in track.findall("box") if b.get("frame") == key)


def exported_demo(tmp_path_factory, to: str) -> tuple[Path, Path, dict]:
    """A copy of the demo run and the tasks of ``labels export --to TO`` with the demo labels:
    (its folder, the tasks' folder, the command's summary)."""
    wd = demo_copy(tmp_path_factory, tmp_path_factory.mktemp(f"labels_{to}") / "wd")
    out = wd / f"{to}_tasks"
    return wd, out, json.loads(labels(wd, "export", "--to", to, "--actions", "annotations/demo_actions.csv",
                                      str(out)).stdout)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo run, its CVAT tasks made from the demo labels, and their task list."""
    wd, out, summary = exported_demo(tmp_path_factory, "cvat")
    return wd, out, summary, cvat_tasks.read_tasks(out)


def test_demo_labels_round_trip_through_cvat_tasks(demo):
    wd, out, summary, tasks = demo
    index = ResultsIndex(wd / RESULTS)
    kept = sorted(c.clip_id for c in index.clips().values() if c.kept)
    assert summary["problems"] == [] and summary["clips"] == len(kept) == 9
    assert summary["frames"] == 90 * len(kept) and summary["tasks"] == len(tasks) == len(index.units())
    assert sorted(c.clip_id for t in tasks.values() for c in t.clips) == kept
    script = (out / "cvat_commands.sh").read_text()
    for t in tasks.values():  # each task created with its frames, its annotations, in the one project
        assert f"task create {t.name} local {out / t.task / 'frames.zip'} --project_id \"$PROJECT\"" in script
        with zipfile.ZipFile(out / t.task / "frames.zip") as z:
            assert len(z.namelist()) == t.size
    before = sorted(os.listdir(wd / "annotations" / "corrections"))
    for t in tasks.values():  # what CVAT gives back when nothing was changed there
        as_cvat_export((out / t.task / "annotations.xml").read_bytes(),
                       wd / "from_cvat" / f"task_{t.name}-cvat for video 1.1.zip")
    new = wd / "empty" / "actions.csv"
    got = json.loads(labels(wd, "import", "--from", "cvat", "from_cvat", "--actions", str(new),
                            "--tasks", str(out)).stdout)
    assert got["refused"] == 0 and got["corrections"] == [] and got["persons"] == 10
    assert new.read_bytes() == (wd / "annotations" / "demo_actions.csv").read_bytes()
    assert sorted(os.listdir(wd / "annotations" / "corrections")) == before  # the boxes did not change
    again = ava_export(wd, new, wd / "export_again")
    for name in AVA_FILES:
        assert (again / name).read_bytes() == (wd / RESULTS / "export" / name).read_bytes(), name


# cvat-cli 2.80.0's own main(): its parser, its partition of task and data options and the CVAT SDK's
# request models (which check the label specification); only the server is left out: the client
# it would connect to records each request and answers with the next id.
CVAT_CLI_WITHOUT_SERVER = """
import json, os, sys
from cvat_cli import __main__ as cli
from cvat_cli._internal import common
from cvat_sdk.api_client import models

def record(kind, spec, **kw):
    with open(os.environ["CVAT_CALLS"], "a+") as fh:
        fh.seek(0)
        made = sum(1 for _ in fh) + 1
        fh.write(json.dumps({"kind": kind, "id": made, "spec": spec.to_dict(), **kw}, default=str) + "\\n")
    return type("Made", (), {"id": made})()

class Projects:
    def create_from_dataset(self, *, spec, dataset_path, dataset_format, status_check_period):
        return record("project", spec, dataset_path=dataset_path)

class Tasks:
    def create_from_data(self, *, spec, resource_type, resources, data_params, annotation_path,
                         annotation_format, status_check_period, pbar):
        models.DataRequest(**data_params)  # the SDK's own check of the data options
        return record("task", spec, resource_type=str(resource_type), resources=list(resources),
                      data=data_params, annotation_path=annotation_path, annotation_format=annotation_format)

class Server:
    projects, tasks = Projects(), Tasks()
    api_client = type("Api", (), {"default_headers": {"User-Agent": "test"}})()
    def check_server_version(self, fail_if_unsupported):
        pass
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False

common.make_client_from_cli = lambda auth, logger: Server()
sys.exit(cli.main(sys.argv[1:]))
"""


def test_cvat_cli_takes_the_commands_and_the_label_spec(demo, tmp_path):
    """``cvat_commands.sh`` run as the docs say, ``CVAT`` being the real cvat-cli (its own
    environment: tests/tool_envs.py) with its server left out: every command line parses, the
    project gets labels.json through the SDK's checks, and each task its frames, its
    annotations in CVAT 1.1 and the project's id."""
    from tool_envs import env_python

    wd, out, _, tasks = demo
    driver = tmp_path / "cvat_cli_without_server.py"
    driver.write_text(CVAT_CLI_WITHOUT_SERVER)
    calls = tmp_path / "calls.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(CVAT=f"{env_python('cvat-cli')} {driver} --server-host http://127.0.0.1:9 --auth alice:secret",
               CVAT_CALLS=str(calls))
    proc = subprocess.run(["sh", str(out / "cvat_commands.sh")], cwd=wd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    made = [json.loads(line) for line in calls.read_text().splitlines()]
    project, *created = made
    spec = json.loads((out / "labels.json").read_text())
    assert project["kind"] == "project" and project["dataset_path"] == ""
    assert [(lab["name"], [(a["name"], a["input_type"], a["mutable"], a["values"]) for a in lab["attributes"]])
            for lab in project["spec"]["labels"]] == \
        [(lab["name"], [(a["name"], a["input_type"], a["mutable"], a["values"]) for a in lab["attributes"]])
         for lab in spec]
    assert {a["name"] for a in project["spec"]["labels"][0]["attributes"]} >= {"person_id", "ava_keyframe", "pose", WAVE}
    assert [c["spec"]["name"] for c in created] == [t.name for t in tasks.values()]
    for c, t in zip(created, tasks.values()):
        assert c["kind"] == "task" and c["spec"]["project_id"] == project["id"] and c["resource_type"] == "local"
        assert c["resources"] == [str(out / t.task / "frames.zip")] and (wd / c["resources"][0]).is_file()
        assert c["annotation_path"] == str(out / t.task / "annotations.xml") and c["annotation_format"] == "CVAT 1.1"
        assert (c["spec"]["segment_size"], c["data"]["image_quality"], c["data"]["sorting_method"]) == \
            (900, 95, "lexicographical")
    ids = (out / "cvat_ids.txt").read_text().splitlines()
    assert ids == [f"project {project['id']}"] + [f"task {c['id']} {t.name}" for c, t in zip(created, tasks.values())]


def test_an_action_ticked_in_cvat_loads_in_datumaro_and_reaches_the_ava_rows(demo):
    wd, out, _, tasks = demo
    task = next(t for t in tasks.values() if any(c.clip_id == "dancer_000" for c in t.clips))
    first = next(c.first_frame for c in task.clips if c.clip_id == "dancer_000")
    root = ET.parse(out / task.task / "annotations.xml").getroot()
    box = at_keyframe(track_of(root, first, 1))
    box.find(f"attribute[@name='{WAVE}']").text = "true"  # what the annotator ticks at the keyframe
    edited = wd / "ticked" / "annotations.xml"
    edited.parent.mkdir()
    ET.ElementTree(root).write(edited, encoding="utf-8", xml_declaration=True)
    code = """
import json, sys
import datumaro as dm
ds = dm.Dataset.import_from(sys.argv[1], "cvat")
out = {}
for item in ds:
    for a in item.annotations:
        if a.attributes.get("keyframe") and a.attributes.get(sys.argv[2]) is True:
            out[item.id] = {k: a.attributes.get(k) for k in ("person_id", "pose", "ava_keyframe", sys.argv[2])}
print(json.dumps(out))
"""
    seen = json.loads(run_in("datumaro", code, str(edited), WAVE).stdout.splitlines()[-1])
    assert seen == {f"frame_{int(box.get('frame')):06d}": {"person_id": 1.0, "pose": "stand",
                                                           "ava_keyframe": float(box.get("frame")), WAVE: True}}
    new = wd / "ticked" / "actions.csv"
    as_cvat_export(edited.read_bytes(), wd / "ticked" / "export" / "task.zip")
    labels(wd, "import", "--from", "cvat", "ticked/export", "--actions", str(new), "--tasks", str(out))
    rows = pd.read_csv(ava_export(wd, new, wd / "ticked" / "export_out") / "ava_format_with_header.csv")
    mine = rows[(rows.video_id == "dancer_000") & (rows.person_id == 1)]
    assert sorted(mine.action_id) == [12, 69] and mine[["frame_stamp", "xmin", "ymax"]].nunique().max() == 1
    assert 69 not in set(pd.read_csv(wd / RESULTS / "export" / "ava_format_with_header.csv").action_id)


def test_bad_cvat_input_is_reported_and_the_rest_goes_on(demo):
    wd, out, _, tasks = demo
    bad = wd / "bad"
    index = ResultsIndex(wd / RESULTS)
    one_clip = index.clip_files("dancer_000").cvat.read_bytes()  # today's per-clip file (video task)
    other = bad / "other_clip.xml"
    other.parent.mkdir()
    other.write_bytes(one_clip.replace(b"<source>dancer_000.mp4", b"<source>carphone_000.mp4"))
    (bad / "unknown_clip.xml").write_bytes(one_clip.replace(b"<source>dancer_000.mp4", b"<source>nosuch_000.mp4"))
    (bad / "notes.xml").write_text("<annotations><oops")
    (bad / "boxes_only.xml").write_bytes(index.clip_files("zidane_000").cvat.read_bytes())  # no action attributes
    task = next(t for t in tasks.values() if len(t.clips) > 1)
    start = {c.clip_id: c.first_frame for c in task.clips}
    root = ET.parse(out / task.task / "annotations.xml").getroot()
    levitate = at_keyframe(track_of(root, start["dancer_001"], 1))
    ET.SubElement(levitate, "attribute", {"name": "levitate"}).text = "true"  # an action the label map lacks
    twice = at_keyframe(track_of(root, start["pianist_000"], 1))
    ET.SubElement(twice, "attribute", {"name": "pose"}).text = "stand"  # beside its "sit"
    as_cvat_export(ET.tostring(root), bad / "task.zip")
    new = wd / "bad_actions.csv"
    report = wd / "bad_report.tsv"
    got = json.loads(labels(wd, "import", "--from", "cvat", "bad", "--actions", str(new), "--tasks", str(out),
                            "--report", str(report)).stdout)
    rep = pd.read_csv(report, sep="\t", dtype=str, keep_default_na=False)
    why = {(Path(r.file).name, r.clip_id, r.person_id): r.reason for r in rep.itertuples(index=False)}
    assert set(why) == {("other_clip.xml", "carphone_000", ""), ("unknown_clip.xml", "nosuch_000", ""),
                        ("notes.xml", "", ""), ("task.zip", "dancer_001", "1"), ("task.zip", "pianist_000", "1"),
                        ("boxes_only.xml", "zidane_000", "")}
    assert "another clip's file" in why[("other_clip.xml", "carphone_000", "")]
    assert "neither a clip of the run nor a task" in why[("unknown_clip.xml", "nosuch_000", "")]
    assert "not XML" in why[("notes.xml", "", "")]
    assert "unknown action(s) 'levitate'" in why[("task.zip", "dancer_001", "1")]
    assert "two poses at one keyframe ('sit', 'stand')" in why[("task.zip", "pianist_000", "1")]
    assert "no action attributes" in why[("boxes_only.xml", "zidane_000", "")]  # its labels are not wiped
    assert got["refused"] == 6
    # the rest of the task came through: every other person of its clips, as the demo labels say
    demo_rows = pd.read_csv(wd / "annotations" / "demo_actions.csv", dtype=str)
    rest = demo_rows[demo_rows.video_id.isin(set(start) - {"dancer_001", "pianist_000"})]
    assert new.read_text() == "video_id,movie_or_real,person_id,action\n" + "".join(
        ",".join(r) + "\n" for r in rest.itertuples(index=False))


def test_changed_boxes_become_corrections_and_a_drawn_person_gets_the_next_id(demo):
    wd, out, _, tasks = demo
    task = next(t for t in tasks.values() if any(c.clip_id == "zidane_000" for c in t.clips))
    start = {c.clip_id: c.first_frame for c in task.clips}
    root = ET.parse(out / task.task / "annotations.xml").getroot()
    moved = at_keyframe(track_of(root, start["zidane_000"], 1))
    moved.set("xtl", f"{float(moved.get('xtl')) + 7:.2f}")
    new_track = ET.SubElement(root, "track", {"id": "99", "label": "person"})  # drawn on zidane_001's frames 3..10
    first = start["zidane_001"]
    template = at_keyframe(track_of(root, first, 1))
    for f in range(first + 2, first + 11):  # as CVAT exports a track: every frame, then outside
        outside, key = ("1", "1") if f == first + 10 else ("0", "1" if f == first + 2 else "0")
        b = ET.SubElement(new_track, "box", {"frame": str(f), "outside": outside, "occluded": "0", "keyframe": key,
                                              "xtl": "1.00", "ytl": "2.00", "xbr": "40.00", "ybr": "60.00", "z_order": "0"})
        for a in template.findall("attribute"):
            ET.SubElement(b, "attribute", {"name": a.get("name")}).text = {"person_id": "0", "pose": "walk"}.get(
                a.get("name"), "false" if a.text in ("true", "false") else a.text)
    corrections = wd / "new_corrections"
    as_cvat_export(ET.tostring(root), wd / "moved" / "task.zip")
    new = wd / "moved_actions.csv"
    got = json.loads(labels(wd, "import", "--from", "cvat", "moved", "--actions", str(new), "--tasks", str(out),
                            "--corrections", str(corrections)).stdout)
    assert got["refused"] == 0
    assert sorted(Path(p).name for p in got["corrections"]) == ["zidane_000.xml", "zidane_001.xml"]
    z0 = dict(cvat.read(corrections / "zidane_000.xml").tracks)
    key = int(moved.get("frame")) - start["zidane_000"] + 1
    assert z0[1][key][0] == pytest.approx(float(moved.get("xtl")))
    z1 = dict(cvat.read(corrections / "zidane_001.xml").tracks)
    assert sorted(z1) == [1, 2] and sorted(z1[2]) == list(range(3, 11))  # frames 3..10; the new person is 2
    assert "zidane_001,r,2,14\n" in new.read_text()  # its pose, under the id the correction gives it


def test_a_bulk_task_set_for_100_units_maps_back_exactly(tmp_path):
    """100 units of 2 clips each (one person a clip, real JPEGs): one task a unit, or one
    task a clip; every task frame is the JPEG its manifest names, and the task files' tracks
    give each clip's boxes back."""
    from microg4m.annotate import cvat_out

    res = tmp_path / "results"
    rng = np.random.default_rng(0)
    truth = {}
    for u in range(100):
        unit, rows = f"u{u:03d}", []
        src = f"s{u:03d}"
        man, tracks = [], ["video_id,frame_id,person_id,xmin,ymin,xmax,ymax,conf"]
        for k in range(2):
            clip = f"{src}_{k:03d}"
            man.append(f"{clip}\t{src}\tr\t{k}\t{3 * k}\t90\t32\t24\tok\t")
            folder = res / "frames" / unit / clip
            folder.mkdir(parents=True)
            for f in range(1, 91):
                img = np.full((24, 32, 3), (u, k * 100, f), np.uint8)
                cv2.imwrite(str(folder / f"{clip}_{f:06d}.jpg"), img)
            x = rng.uniform(0, 10)
            for f in range(1, 91):
                tracks.append(f"{clip},{f},1,{x + f / 10:.2f},2.00,{x + 15:.2f},20.00,0.9000")
            truth[clip] = {f: (round(x + f / 10, 2), 2.0, round(x + 15, 2), 20.0) for f in range(1, 91)}
            rows.append(clip)
        (res / "clips" / unit).mkdir(parents=True)
        (res / "clips" / unit / "manifest.tsv").write_text(
            "clip_id\tsource_id\tclip_type\tseq\tstart_s\tframes\twidth\theight\tstatus\treason\n" + "\n".join(man) + "\n")
        (res / "filter").mkdir(exist_ok=True)
        (res / "filter" / f"{unit}.tsv").write_text(
            "clip_id\tkeep\treason\n" + "".join(f"{c}\t1\tkept\n" for c in rows))
        (res / "tracks").mkdir(exist_ok=True)
        (res / "tracks" / f"{unit}.csv").write_text("\n".join(tracks) + "\n")
    index = ResultsIndex(res)
    lmap = REPO / "annotations" / "label_map.pbtxt"
    for per_task, n_tasks in ((None, 100), (1, 200)):
        out = tmp_path / f"tasks_{per_task}"
        summary = cvat_out.export(index, None, lmap, out, clips_per_task=per_task)
        tasks = cvat_tasks.read_tasks(out)
        assert summary["problems"] == [] and summary["tasks"] == len(tasks) == n_tasks
        assert summary["frames"] == 200 * 90 and {t.size for t in tasks.values()} == {18000 // n_tasks}
        for t in list(tasks.values())[::17]:
            with zipfile.ZipFile(out / t.task / "frames.zip") as z:
                names = z.namelist()
                assert names == [f"{i:06d}.jpg" for i in range(t.size)]  # every sorting gives this order
                for i in rng.choice(t.size, 5, replace=False):
                    c = t.clip_at(int(i))
                    f = int(i) - c.first_frame + 1
                    jpeg = res / "frames" / c.unit / c.clip_id / f"{c.clip_id}_{f:06d}.jpg"
                    assert z.read(names[i]) == jpeg.read_bytes()
            clips, refused = cvat_tasks.split(cvat.read(out / t.task / "annotations.xml"), t, "x")
            assert refused == [] and [c.clip_id for c in clips] == [c.clip_id for c in t.clips]
            for c in clips:
                (pid, boxes), = c.tracks
                assert pid == 1 and sorted(boxes) == list(range(1, 91))
                assert max(np.abs(np.array(boxes[f]) - truth[c.clip_id][f]).max() for f in boxes) < 1e-6


def test_the_label_map_as_a_tracks_attributes():
    """Poses one choice, the other actions yes/no boxes type by type; back to ids, or the reason."""
    from microg4m.formats.action_attributes import ActionAttributeError, ActionAttributes
    from microg4m.formats.labels import read_label_map

    a = ActionAttributes.from_label_map(read_label_map(REPO / "annotations" / "label_map.pbtxt"))
    assert (len(a.poses), len(a.several), a.several[0], a.several[-1]) == (11, 39, 17, 80)
    assert a.split([79, 12, 11]) == ("stand", {"talk to (e.g., self, a person, a group)"}, [11])
    assert a.ids(["stand"], [WAVE, "carry/hold (an object)"]) == [12, 17, 69]
    assert a.ids(["none"], []) == []
    for poses, ticked, why in ((["stand", "sit"], [], "two poses at one keyframe"),
                               ([], ["levitate"], r"unknown action\(s\) 'levitate'"),
                               ([WAVE], [], "given as the wrong kind")):
        with pytest.raises(ActionAttributeError, match=why):
            a.ids(poses, ticked)
    spec = cvat.label_spec(a)[0]["attributes"]
    assert [s["name"] for s in spec[:3]] == ["person_id", "ava_keyframe", "pose"]
    assert spec[2]["values"][:2] == ["none", "bend/bow (at the waist)"] and len(spec[2]["values"]) == 12
    assert {s["input_type"] for s in spec[3:]} == {"checkbox"} and len(spec) == 42
