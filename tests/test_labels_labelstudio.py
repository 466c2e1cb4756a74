"""Action labels through Label Studio both ways, on the session's demo run: the config and the
tasks ``microg4m labels export --to labelstudio`` writes are checked by Label Studio's own
validation (label-studio-sdk's LabelInterface) and taken by a real Label Studio server on
the loopback address; annotations made there from the tasks' predictions, exported by the
server as JSON and read back by ``microg4m labels import``, give the demo's AVA files byte
for byte; an action chosen there reaches the AVA rows; another project's export is refused
with the reason while the rest goes on."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from demo_run import RESULTS
from labelstudio_server import label_studio
from test_labels_cvat import AVA_FILES, ava_export, exported_demo, labels
from tool_envs import run_in

VALIDATE = """
import json, sys
from label_studio_sdk.label_interface import LabelInterface
config = open(sys.argv[1]).read()
li = LabelInterface(config)
li.validate()
errors = {}
for path in sys.argv[2:]:
    for n, task in enumerate(json.load(open(path))):
        for p in task["predictions"]:
            got = li.validate_prediction(p, return_errors=True)
            if got:
                errors[f"{path}:{n}"] = got
print(json.dumps({"controls": sorted(li.controls.keys()) if hasattr(li.controls, "keys") else
                  sorted(c.name for c in li.controls), "errors": errors}))
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo run, the Label Studio config and tasks made from the demo labels, the summary."""
    return exported_demo(tmp_path_factory, "labelstudio")


def test_label_studio_validates_the_config_and_every_task(demo):
    wd, out, summary = demo
    assert summary["problems"] == [] and summary["tasks"] == 9 and summary["persons"] == 10
    files = sorted(str(p) for p in (out / "tasks").glob("*.json"))
    got = json.loads(run_in("labelstudio", VALIDATE, str(out / "config.xml"), *files).stdout.splitlines()[-1])
    assert got["errors"] == {}
    assert set(got["controls"]) == {"box", "person", "pose", "object_manipulation", "person_interaction"}
    # the check can fail: a choice the config lacks is Label Studio's error
    broken = json.loads((out / "tasks" / "batch00001.json").read_text())
    broken[0]["predictions"][0]["result"][1]["value"]["choices"] = ["levitate"]
    (wd / "broken.json").write_text(json.dumps(broken))
    got = json.loads(run_in("labelstudio", VALIDATE, str(out / "config.xml"), str(wd / "broken.json")).stdout
                     .splitlines()[-1])
    assert "Invalid value for control 'pose'" in json.dumps(got["errors"])


def annotate_all(api, project: int, change=None) -> None:
    """An annotation for every task: its prediction as the annotator accepts it (``change``
    edits the result of one task first)."""
    tasks = api.ok("GET", f"/api/tasks?project={project}&page_size=1000")
    for t in tasks["tasks"] if isinstance(tasks, dict) else tasks:
        full = api.ok("GET", f"/api/tasks/{t['id']}")
        result = [dict(r, origin="manual") for r in full["predictions"][0]["result"]]
        if change is not None:
            result = change(full["data"]["clip_id"], result)
        api.ok("POST", f"/api/tasks/{t['id']}/annotations", json={"result": result, "lead_time": 1.0})


def wave(clip, result):
    """dancer_000's person 1 also waves (action 69, a person interaction)."""
    if clip == "dancer_000":
        result.append({"id": "person1", "type": "choices", "from_name": "person_interaction", "to_name": "video",
                       "origin": "manual", "value": {"choices": ["hand wave"]}})
    return result


def test_demo_labels_round_trip_through_a_label_studio_server(demo, tmp_path):
    wd, out, _ = demo
    (tmp_path / "ls").mkdir()
    with label_studio(tmp_path / "ls") as api:
        bad = api.call("POST", "/api/projects", json={"title": "broken", "label_config": (out / "config.xml")
                                                      .read_text().replace('toName="video" perRegion', 'toName="vid" perRegion', 1)})
        assert bad.status_code == 400 and "not found in names" in bad.text  # the server checks the config
        exports = {}
        for name, change in (("same", None), ("wave", wave)):
            project = api.ok("POST", "/api/projects", json={"title": f"microg4m {name}",
                                                            "label_config": (out / "config.xml").read_text()})["id"]
            for f in sorted((out / "tasks").glob("*.json")):
                with open(f, "rb") as fh:
                    got = api.ok("POST", f"/api/projects/{project}/import", files={"file": fh})
                assert got["task_count"] == got["prediction_count"] > 0
            annotate_all(api, project, change)
            exports[name] = api.ok("GET", f"/api/projects/{project}/export?exportType=JSON&download_all_tasks=true")
        other = api.ok("POST", "/api/projects", json={"title": "another project", "label_config":
                       '<View><Image name="image" value="$image"/><Choices name="kind" toName="image">'
                       '<Choice value="cat"/><Choice value="dog"/></Choices></View>'})["id"]
        api.ok("POST", f"/api/projects/{other}/import", json=[{"image": "/static/images/logo.png"}])
        task = api.ok("GET", f"/api/tasks?project={other}")
        task = (task["tasks"] if isinstance(task, dict) else task)[0]
        api.ok("POST", f"/api/tasks/{task['id']}/annotations", json={"result": [
            {"id": "a1", "type": "choices", "from_name": "kind", "to_name": "image", "value": {"choices": ["cat"]}}]})
        exports["other"] = api.ok("GET", f"/api/projects/{other}/export?exportType=JSON")
    for name, data in exports.items():
        (wd / "from_ls" / name).mkdir(parents=True)
        (wd / "from_ls" / name / "export.json").write_text(json.dumps(data))

    same = wd / "ls_same.csv"
    got = json.loads(labels(wd, "import", "--from", "labelstudio", "from_ls/same", "--actions", str(same)).stdout)
    assert got["refused"] == 0 and got["tasks"] == 9
    assert same.read_bytes() == (wd / "annotations" / "demo_actions.csv").read_bytes()
    again = ava_export(wd, same, wd / "ls_export_same")
    for name in AVA_FILES:
        assert (again / name).read_bytes() == (wd / RESULTS / "export" / name).read_bytes(), name

    (wd / "from_ls" / "mixed").mkdir()  # another project's export beside this one's
    for name in ("wave", "other"):
        (wd / "from_ls" / "mixed" / f"{name}.json").write_text((wd / "from_ls" / name / "export.json").read_text())
    waved, report = wd / "ls_wave.csv", wd / "ls_report.tsv"
    got = json.loads(labels(wd, "import", "--from", "labelstudio", "from_ls/mixed", "--actions", str(waved),
                            "--report", str(report)).stdout)
    rep = pd.read_csv(report, sep="\t", dtype=str, keep_default_na=False)
    assert got["refused"] == 1 and rep.file.tolist() == ["from_ls/mixed/other.json"]
    assert "no data.clip_id" in rep.reason[0] and "another project's" in rep.reason[0]
    rows = pd.read_csv(ava_export(wd, waved, wd / "ls_export_wave") / "ava_format_with_header.csv")
    mine = rows[(rows.video_id == "dancer_000") & (rows.person_id == 1)]
    assert sorted(mine.action_id) == [12, 69]
    assert len(rows) == len(pd.read_csv(wd / RESULTS / "export" / "ava_format_with_header.csv")) + 1
