"""Command-line options of the page (no Flask import: ``microg4m --help`` stays fast)."""

from __future__ import annotations

import argparse
import re

ANNOTATOR = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", default="results", help="results folder of a run (default: results)")
    p.add_argument("--actions", default=None,
                   help="actions CSV to write (default: annotations/actions.csv, "
                        "or annotations/actions.NAME.csv with --annotator NAME)")
    p.add_argument("--screening", default="annotations/screening_excluded.txt",
                   help="screening file the filter reads (default: annotations/screening_excluded.txt)")
    p.add_argument("--label-map", default="annotations/label_map.pbtxt")
    p.add_argument("--vqa-reviews", default=None, metavar="JSON",
                   help="reviewed captions and QA pairs to write (default: vqa_reviews.json beside the "
                        "actions file, i.e. annotations/vqa_reviews.json; the workflow reads vqa.reviews)")
    p.add_argument("--annotator", default="", help="annotator name ([A-Za-z0-9_-]); selects the actions file")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="another host name the page is reached by (e.g. through a reverse proxy "
                        "or with --host 0.0.0.0); requests naming any other host are refused")


def actions_path(args: argparse.Namespace) -> str:
    if args.annotator and not ANNOTATOR.match(args.annotator):
        raise ValueError(f"--annotator {args.annotator!r}: use 1-40 letters, digits, '_' or '-'")
    if args.actions:
        return args.actions
    return f"annotations/actions.{args.annotator}.csv" if args.annotator else "annotations/actions.csv"
