"""``microg4m labels import --from labelstudio``: Label Studio JSON exports back into an actions
file: per task (clip) its latest annotation that is not cancelled, per region ``person<id>``
the chosen actions. Refused, each with file, clip, person and reason, while the rest goes
on: a file that is not such an export (another project's), a clip the run does not know, a
region drawn in Label Studio (boxes come back through CVAT), an unknown action, two poses.
"""

from __future__ import annotations

from pathlib import Path

from microg4m.formats import labelstudio
from microg4m.formats.action_attributes import ActionAttributes
from .label_intake import Intake


def export_files(path) -> list[Path]:
    path = Path(path)
    return sorted(p for p in path.rglob("*.json") if p.is_file()) if path.is_dir() else [path]


def run(intake: Intake, attrs: ActionAttributes, path) -> dict:
    files = export_files(path)
    if not files:
        intake.refuse(path, "", "", "no Label Studio export (.json) found")
    tasks = 0
    for f in files:
        try:
            exported = labelstudio.read_export(f, attrs)
        except labelstudio.LabelStudioError as exc:
            intake.refuse(f, "", "", str(exc).removeprefix(f"{f}: "))
            continue
        for t in exported:
            tasks += 1
            if intake.clip(f, t.clip_id) is None:
                continue
            for person, why in t.refused:
                intake.refuse(f, t.clip_id, person, f"task {t.task_id}: {why}")
            for pid, ids in sorted(t.persons.items()):
                intake.add(f, t.clip_id, pid, ids)
    return {"files": len(files), "tasks": tasks}
