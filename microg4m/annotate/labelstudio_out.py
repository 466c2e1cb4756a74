"""``microg4m labels export --to labelstudio``: the labeling config and the tasks of the run's
kept clips (one task a clip; its persons' tracks and actions as predictions), one JSON file
of tasks per unit, for a Label Studio project.

A task's video is ``VIDEO_URL + <the clip's mp4, relative to the results folder's parent>``:
by default Label Studio's local-files URL (``/data/local-files/?d=results/clips/...``),
which it serves with ``LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true`` and
``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT`` set to the folder that holds ``results/``
(docs/labelstudio.md); any other prefix (a web server, a bucket) works the same way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from microg4m.common.atomic import write_text
from microg4m.formats import labelstudio
from microg4m.formats.action_attributes import ActionAttributes
from microg4m.formats.labels import read_label_map
from microg4m.formats.results_index import ResultsIndex
from .label_persons import actions_of, kept_clips, persons

LOCAL_FILES = "/data/local-files/?d="
CONFIG_FILE = "config.xml"
TASKS_DIR = "tasks"


def export(index: ResultsIndex, actions, label_map, out_dir, *, video_url: str = LOCAL_FILES) -> dict:
    """Write ``config.xml`` and ``tasks/<unit>.json`` into ``out_dir``; a summary with the problems."""
    attrs = ActionAttributes.from_label_map(read_label_map(label_map))
    labels, problems = actions_of(actions, set(attrs.ids_in_order))
    out = Path(out_dir)
    write_text(out / CONFIG_FILE, labelstudio.config_xml(attrs))
    base = index.root.parent
    done: set[tuple[str, int]] = set()
    files, n_tasks = [], 0
    for unit, clips in kept_clips(index).items():
        tasks = []
        for clip in clips:
            results = []
            for p in persons(index, clip):
                ids = labels.get((clip.clip_id, p.person_id), [])
                pose, _, dropped = attrs.split(ids)
                if dropped:
                    problems.append(f"{actions}: {clip.clip_id} person {p.person_id}: a second pose "
                                    f"{[attrs.name_of[a] for a in dropped]}; the pose is one choice, {pose!r} written")
                    ids = [a for a in ids if a not in dropped]
                results += labelstudio.person_results(p.person_id, p.frames, p.boxes, ids, attrs,
                                                      clip_frames=clip.frames, width=clip.width,
                                                      height=clip.height, keyframe=p.keyframe)
                done.add((clip.clip_id, p.person_id))
            rel = os.path.relpath(clip.path, base)
            tasks.append(labelstudio.task(clip.clip_id, unit, clip.clip_type, video_url + rel, results))
        path = out / TASKS_DIR / f"{unit}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(tasks, separators=(",", ":")) + "\n")
        files.append(str(path))
        n_tasks += len(tasks)
    left = sorted(k for k in labels if k not in done)
    if left:
        problems.append(f"{actions}: the labels of {len(left)} person(s) of clips not exported (not kept, or "
                        f"without a box), e.g. {left[0][0]} person {left[0][1]}; not in the tasks")
    return {"tasks": n_tasks, "files": files, "config": str(out / CONFIG_FILE), "persons": len(done),
            "problems": problems}
