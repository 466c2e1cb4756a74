"""Time ``microg4m labels`` at the paper's scale (not part of the pipeline).

    python bench/bench_labels.py                          # 4,759 clips in 48 units, no frames.zip
    python bench/bench_labels.py --clips 500 --frames     # with the JPEG frames zipped into the tasks

Builds a results folder of the paper's shape (bench/annotate_folder.py: 1-5 persons a clip,
real clips' JPEG frames hard-linked under every clip's name with --frames), then times, in
this process: ``labels export --to cvat`` (one task per ``--clips-per-task`` clips), the
import of every task's annotations as CVAT gives them back (nothing changed: every person's
actions set, no correction written), ``labels export --to labelstudio`` and the import of an
export whose every task has its prediction as annotation. Prints one line per step: seconds,
and what it wrote.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, git_rev  # noqa: E402

import annotate_folder  # noqa: E402

from microg4m.annotate import cvat_in, cvat_out, labelstudio_in, labelstudio_out  # noqa: E402
from microg4m.annotate.label_intake import Intake  # noqa: E402
from microg4m.formats.action_attributes import ActionAttributes  # noqa: E402
from microg4m.formats.labels import read_label_map  # noqa: E402
from microg4m.formats.results_index import ResultsIndex  # noqa: E402

LABEL_MAP = REPO / "annotations" / "label_map.pbtxt"


def size(folder: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in folder.rglob(pattern))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", type=int, default=4759)
    ap.add_argument("--units", type=int, default=48)
    ap.add_argument("--clips-per-task", type=int, default=100)
    ap.add_argument("--frames", action="store_true", help="give the clips JPEG frames and zip them into the tasks")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_labels")
    args = ap.parse_args()
    res = args.work / "results"
    info = annotate_folder.build(res, args.clips, args.units, 1, args.work, jpeg_frames=args.frames)
    index = ResultsIndex(res)
    attrs = ActionAttributes.from_label_map(read_label_map(LABEL_MAP))
    out = args.work / "out"
    shutil.rmtree(out, ignore_errors=True)
    print(f"bench_labels.py at {git_rev()}: {sum(len(v) for v in index.units().values())} sources, "
          f"{info.get('kept', args.clips)} kept clips, {len(index.units())} units")

    labels = out / "actions.csv"  # every person a pose and one other action, seeded
    rng = random.Random(7)
    rows = ["video_id,movie_or_real,person_id,action"]
    for clip in index.clips().values():
        if clip.kept:
            for pid in index.persons(clip.clip_id):
                for a in (rng.choice(attrs.poses), rng.choice(attrs.several)):
                    rows.append(f"{clip.clip_id},{clip.clip_type},{pid},{a}")
    labels.parent.mkdir(parents=True, exist_ok=True)
    labels.write_text("\n".join(rows) + "\n")
    t = time.perf_counter()
    got = cvat_out.export(index, labels, LABEL_MAP, out / "cvat", clips_per_task=args.clips_per_task,
                          frames=args.frames)
    print(f"export --to cvat: {time.perf_counter() - t:.1f} s; {got['tasks']} tasks, {got['clips']} clips, "
          f"{got['frames']} frames, {got['persons']} persons; annotations.xml {size(out / 'cvat', '*.xml') / 2**20:.0f} MiB, "
          f"frames.zip {size(out / 'cvat', '*.zip') / 2**20:.0f} MiB; problems {len(got['problems'])}")
    exports = out / "cvat_exports"
    for task in (out / "cvat").iterdir():
        if (task / "annotations.xml").is_file():
            (exports / task.name).mkdir(parents=True)
            shutil.copy(task / "annotations.xml", exports / task.name / "export.xml")
    t = time.perf_counter()
    intake = Intake(index, set(attrs.ids_in_order))
    read = cvat_in.run(intake, attrs, exports, tasks_dir=out / "cvat", corrections_dir=out / "corrections")
    wrote = intake.write(out / "cvat_actions.csv", out / "screening.txt")
    print(f"import --from cvat: {time.perf_counter() - t:.1f} s; {read['files']} files, {wrote['persons']} persons, "
          f"{len(intake.refused)} refused, {len(read['corrections'])} corrections")

    t = time.perf_counter()
    got = labelstudio_out.export(index, labels, LABEL_MAP, out / "ls")
    print(f"export --to labelstudio: {time.perf_counter() - t:.1f} s; {got['tasks']} tasks, {len(got['files'])} files, "
          f"{size(out / 'ls', '*.json') / 2**20:.0f} MiB")
    annotated = []
    for f in got["files"]:
        for task in json.loads(Path(f).read_text()):
            annotated.append({"id": len(annotated), "data": task["data"],
                              "annotations": [{"id": 1, "result": task["predictions"][0]["result"]}]})
    (out / "ls_export.json").write_text(json.dumps(annotated))
    t = time.perf_counter()
    intake = Intake(index, set(attrs.ids_in_order))
    read = labelstudio_in.run(intake, attrs, out / "ls_export.json")
    wrote = intake.write(out / "ls_actions.csv", out / "screening.txt")
    print(f"import --from labelstudio: {time.perf_counter() - t:.1f} s; {read['tasks']} tasks, "
          f"{wrote['persons']} persons, {len(intake.refused)} refused")
    for name in ("cvat_actions.csv", "ls_actions.csv"):  # both give the labels back, row for row
        print(f"{name} == actions.csv: {(out / name).read_bytes() == labels.read_bytes()}")


if __name__ == "__main__":
    main()
