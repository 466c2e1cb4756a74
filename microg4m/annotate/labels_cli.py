"""``microg4m labels``: action labels in the tools teams already label with.

* ``labels export --to cvat|labelstudio [--actions FILE] OUT_DIR``: the tasks of the run's
  kept clips, their persons' tracks and the actions of FILE (default: the config's
  ``export.actions``): CVAT image-sequence tasks per unit or per N clips, with the
  ``cvat-cli`` commands that create them (cvat_out.py); or a Label Studio config and tasks
  (labelstudio_out.py).
* ``labels import --from cvat|labelstudio PATH --actions FILE``: one export file, or a folder
  of them, into FILE as the labelling page writes it; CVAT's changed boxes into correction
  files; what was refused is printed and written to a report (label_intake.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from microg4m import config


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="labels_command", required=True, metavar="COMMAND")
    e = sub.add_parser("export", help="tasks of the kept clips with their tracks and actions, for CVAT or Label Studio")
    e.add_argument("--to", required=True, choices=["cvat", "labelstudio"])
    e.add_argument("out_dir", metavar="OUT_DIR")
    e.add_argument("--clips-per-task", type=int, default=None, metavar="N",
                   help="cvat: one task per N clips of a unit (default: one task per unit)")
    e.add_argument("--no-frames", action="store_true",
                   help="cvat: no frames.zip (the tasks' annotations only: their data is on the server already)")
    e.add_argument("--task-prefix", default="microg4m-", help="cvat: the tasks' names begin so (default: %(default)s)")
    e.add_argument("--video-url", default=None, metavar="PREFIX",
                   help="labelstudio: the videos' URL before the clip's path below the results folder's parent "
                        "(default: Label Studio's local files, /data/local-files/?d=)")
    i = sub.add_parser("import", help="a CVAT or Label Studio export (a file or a folder of them) into an actions file")
    i.add_argument("--from", dest="source", required=True, choices=["cvat", "labelstudio"])
    i.add_argument("path", metavar="PATH", help="an export file, or a folder of them")
    i.add_argument("--tasks", default=None, metavar="DIR",
                   help="cvat: the folder `labels export --to cvat` wrote (its tasks.tsv; default: the first "
                        "tasks.tsv in PATH or a folder above it)")
    i.add_argument("--corrections", default=None, metavar="DIR",
                   help="cvat: where changed boxes go as correction files (default: the config's corrections)")
    i.add_argument("--no-boxes", action="store_true", help="cvat: read the actions only, write no correction file")
    i.add_argument("--report", default=None, metavar="TSV",
                   help="write what was refused here (default: labels_import_report.tsv beside the actions file)")
    for q in (e, i):
        q.add_argument("--configfile", default=None,
                       help=f"workflow config (default: {config.DEFAULT_CONFIG} when it exists, else the defaults)")
        q.add_argument("--results", default=None, help="results folder of a run (config: results)")
        q.add_argument("--label-map", default=None, help="label map (config: export.label_map)")
    e.add_argument("--actions", default=None, help="actions CSV whose labels go into the tasks (config: export.actions)")
    i.add_argument("--actions", required=True, help="actions CSV to write (made when missing)")


def run(args: argparse.Namespace) -> dict:
    from microg4m.formats.action_attributes import ActionAttributes
    from microg4m.formats.labels import read_label_map
    from microg4m.formats.results_index import ResultsIndex

    cfg = config.load(args.configfile, overrides={"results": args.results, "export.label_map": args.label_map})
    index = ResultsIndex(cfg["results"])
    if not index.units():
        raise ValueError(f"{cfg['results']}: no units (not the results folder of a run?)")
    label_map = cfg["export"]["label_map"]
    if args.labels_command == "export":
        actions = args.actions or cfg["export"]["actions"]
        if args.to == "cvat":
            from . import cvat_out

            out = cvat_out.export(index, actions, label_map, args.out_dir, clips_per_task=args.clips_per_task,
                                  prefix=args.task_prefix, frames=not args.no_frames)
            print(Path(out["commands"]).read_text(), file=sys.stderr)
        else:
            from . import labelstudio_out

            out = labelstudio_out.export(index, actions, label_map, args.out_dir,
                                         video_url=args.video_url or labelstudio_out.LOCAL_FILES)
        for problem in out["problems"]:
            print(f"labels export: {problem}", file=sys.stderr)
        return out
    from .label_intake import Intake

    attrs = ActionAttributes.from_label_map(read_label_map(label_map))
    intake = Intake(index, set(attrs.ids_in_order))
    if args.source == "cvat":
        from . import cvat_in

        corrections = None if args.no_boxes else (args.corrections or cfg["corrections"])
        read = cvat_in.run(intake, attrs, args.path, tasks_dir=args.tasks, corrections_dir=corrections)
    else:
        from . import labelstudio_in

        read = labelstudio_in.run(intake, attrs, args.path)
    summary = read | intake.write(args.actions, cfg["filter"]["screening"])
    report = Path(args.report) if args.report else Path(args.actions).with_name("labels_import_report.tsv")
    intake.write_report(report)
    summary["report"] = str(report)
    return summary
