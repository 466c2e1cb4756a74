"""``microg4m labels export --to cvat``: CVAT tasks of the run's kept clips with their persons'
tracks and actions, and the ``cvat-cli`` commands that create them on a team's server.

One image-sequence task per unit, or per ``clips_per_task`` clips of a unit
(:mod:`microg4m.formats.cvat_tasks`), from the frames stage's JPEGs (found through the
results index). Every person is a track with the attributes of :func:`cvat.label_spec`:
``person_id``, ``ava_keyframe`` (the task frame of the person's AVA keyframe, always a
keyframe of the track), the one-choice ``pose`` and a yes/no box per other action, set from
the actions file on every keyframe. A clip without its JPEG frames, a person with two poses
and a row of the actions file that cannot be used are reported; the rest is written.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from microg4m.common.atomic import write_text
from microg4m.formats import cvat, cvat_tasks
from microg4m.formats.action_attributes import POSE, ActionAttributes
from microg4m.formats.frame_lists import FRAME_TMPL
from microg4m.formats.labels import read_label_map
from microg4m.formats.results_index import ResultsIndex
from .label_persons import actions_of, kept_clips, persons

LABELS_FILE = "labels.json"
COMMANDS_FILE = "cvat_commands.sh"
CLIPS_PER_JOB = 10  # a CVAT job (an annotator's share) of this many 90-frame clips: jobs never cut a clip


def jpegs(index: ResultsIndex, clip_id: str, frames: int) -> list[Path]:
    """The clip's JPEG frames as the frames stage wrote them, frame 1 first; ValueError when one is missing."""
    folder = index.clip_files(clip_id).frames_dir
    files = [folder / FRAME_TMPL.format(clip=clip_id, n=f) for f in range(1, frames + 1)]
    missing = [p for p in files if not p.is_file()]
    if missing:
        raise ValueError(f"{clip_id}: {len(missing)} of its {frames} JPEG frames are missing (e.g. {missing[0]}); "
                         "run the frames stage (snakemake) first")
    return files


def commands(out: Path, tasks: list[cvat_tasks.Task], segment: int) -> str:
    """The shell script that creates the tasks in one project and fetches their exports."""
    q = shlex.quote
    lines = [
        "#!/bin/sh",
        "# Create the CVAT tasks of this folder on your server (cvat-cli from PyPI: pip install cvat-cli).",
        "# Set CVAT to your server and account first, e.g.",
        '#   CVAT="cvat-cli --server-host https://cvat.example.org --auth alice"',
        "set -eu",
        ': "${CVAT:?set CVAT to cvat-cli with your --server-host and --auth}"',
        f"PROJECT=$($CVAT project create {q('microg4m ' + out.resolve().name)} --labels {q(str(out / LABELS_FILE))})",
        f"echo \"project $PROJECT\" > {q(str(out / 'cvat_ids.txt'))}",
    ]
    for t in tasks:
        folder = out / t.task
        lines.append(
            f"TASK=$($CVAT task create {q(t.name)} local {q(str(folder / cvat_tasks.FRAMES))} --project_id \"$PROJECT\" "
            f"--annotation_path {q(str(folder / cvat_tasks.ANNOTATIONS))} --annotation_format 'CVAT 1.1' "
            f"--segment_size {segment} --image_quality 95 --sorting-method lexicographical)")
        lines.append(f"echo \"task $TASK {t.name}\" >> {q(str(out / 'cvat_ids.txt'))}")
    lines += [
        "# After labelling, fetch each task's annotations (CVAT for video 1.1) beside its manifest:",
        "#   $CVAT task export-dataset TASK_ID " + q(str(out / "TASK" / "export.zip"))
        + " --format 'CVAT for video 1.1'",
        "# and read them back: microg4m labels import --from cvat " + q(str(out)) + " --actions FILE",
    ]
    return "\n".join(lines) + "\n"


def export(index: ResultsIndex, actions, label_map, out_dir, *, clips_per_task: int | None = None,
           prefix: str = "microg4m-", clips_per_job: int = CLIPS_PER_JOB, frames: bool = True) -> dict:
    """Write the tasks into ``out_dir``; return a summary with the problems (also on stderr).
    ``frames``: False writes no ``frames.zip`` (the tasks' data is on the server already)."""
    attrs = ActionAttributes.from_label_map(read_label_map(label_map))
    labels, problems = actions_of(actions, set(attrs.ids_in_order))
    out = Path(out_dir)
    units: dict[str, list] = {}
    for unit, clips in kept_clips(index).items():
        for clip in clips:
            try:
                if frames:
                    jpegs(index, clip.clip_id, clip.frames)
            except ValueError as exc:
                problems.append(f"{exc}; clip left out")
                continue
            units.setdefault(unit, []).append(clip)
    tasks = cvat_tasks.plan(units, clips_per_task, prefix)
    exported: set[tuple[str, int]] = set()
    for task in tasks:
        folder = out / task.task
        tracks = []
        for tc in task.clips:
            for p in persons(index, index.clip(tc.clip_id)):
                ids = labels.get((tc.clip_id, p.person_id), [])
                pose, ticked, dropped = attrs.split(ids)
                if dropped:
                    problems.append(f"{actions}: {tc.clip_id} person {p.person_id}: a second pose "
                                    f"{[attrs.name_of[a] for a in dropped]}; CVAT's pose is one choice, {pose!r} "
                                    "written")
                values = {POSE: pose} | {attrs.name_of[a]: str(attrs.name_of[a] in ticked).lower()
                                         for a in attrs.several}
                tracks.append(cvat.TrackOut(p.person_id, p.frames, p.boxes, tc.frames, tc.first_frame,
                                            p.keyframe, values))
                exported.add((tc.clip_id, p.person_id))
        folder.mkdir(parents=True, exist_ok=True)
        write_text(folder / cvat_tasks.ANNOTATIONS,
                   cvat.task_xml(task.name, task.size, tracks, actions=attrs, width=task.clips[0].width,
                                 height=task.clips[0].height).decode())  # Datumaro needs a size: the first clip's
        if frames:
            cvat_tasks.write_frames(folder / cvat_tasks.FRAMES, task, lambda c: jpegs(index, c.clip_id, c.frames))
        cvat_tasks.write_manifest(folder, task)
    cvat_tasks.write_tasks(out, tasks)
    write_text(out / LABELS_FILE, json.dumps(cvat.label_spec(attrs), indent=1) + "\n")
    left = sorted(k for k in labels if k not in exported)
    if left:
        problems.append(f"{actions}: the labels of {len(left)} person(s) of clips not exported (not kept, or "
                        f"without frames or a box), e.g. {left[0][0]} person {left[0][1]}; not in the tasks")
    script = commands(out, tasks, clips_per_job * 90)
    write_text(out / COMMANDS_FILE, script)
    return {"tasks": len(tasks), "clips": sum(len(t.clips) for t in tasks), "frames": sum(t.size for t in tasks),
            "persons": len(exported), "folder": str(out), "commands": str(out / COMMANDS_FILE),
            "problems": problems}
