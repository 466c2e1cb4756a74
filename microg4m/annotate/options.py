"""Command-line options of the page (no Flask import: ``microg4m --help`` stays fast).

The files default to where the workflow reads them: the run's config file
(``--configfile``, default ``config/config.yaml`` when it exists; missing keys take the
schema's defaults), read and validated by :func:`microg4m.config.load`. Options given on
the command line win.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

from microg4m import config

ANNOTATOR = re.compile(r"[A-Za-z0-9_-]{1,40}")  # fullmatch: "alice\n" is no name


@dataclass(frozen=True)
class Paths:
    results: str
    actions: str
    screening: str
    label_map: str
    vqa_reviews: str
    frame_cache_mb: int | None = None  # config annotate.frame_cache_mb (None: the schema's default)
    suggestions: bool = True  # config annotate.suggestions
    detections: dict | None = None  # {detections, score, iou_min}: config annotate.detections, --suggest


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", default=None,
                   help=f"workflow config to read the file locations from (default: {config.DEFAULT_CONFIG} "
                        f"when it exists, else the schema's defaults)")
    p.add_argument("--results", default=None, help="results folder of a run (config: results)")
    p.add_argument("--actions", default=None,
                   help="actions CSV to write (config: export.actions; with --annotator NAME: "
                        "actions.NAME.csv beside it)")
    p.add_argument("--screening", default=None, help="screening file the filter reads (config: filter.screening)")
    p.add_argument("--label-map", default=None, help="label map (config: export.label_map)")
    p.add_argument("--vqa-reviews", default=None, metavar="JSON",
                   help="reviewed captions and QA pairs to write (config: vqa.reviews; with --actions: "
                        "vqa_reviews.json beside that file)")
    p.add_argument("--suggest", default=None, metavar="DETECTIONS.csv",
                   help="an action model's AVA detections (video_id,frame_stamp,x1,y1,x2,y2,action_id,score) as "
                        "suggestions, matched to the persons by IoU (config: annotate.detections)")
    p.add_argument("--suggest-score", type=float, default=None, metavar="SCORE",
                   help="suggest the actions scored at least this (config: annotate.detection_score)")
    p.add_argument("--annotator", default="", help="annotator name ([A-Za-z0-9_-]); selects the actions file")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="another host name the page is reached by (e.g. through a reverse proxy "
                        "or with --host 0.0.0.0); requests naming any other host are refused")
    p.add_argument("--trusted-proxy", default=None, metavar="ADDR",
                   help="address of a reverse proxy whose X-Forwarded-For/-Proto headers are believed "
                        "(e.g. a TLS proxy on 127.0.0.1: the Origin check then expects https)")


def actions_path(args: argparse.Namespace, actions: str = "annotations/actions.csv") -> str:
    """--actions, else ``actions`` (config export.actions), as actions.NAME.csv for --annotator NAME."""
    if args.annotator and not ANNOTATOR.fullmatch(args.annotator):
        raise ValueError(f"--annotator {args.annotator!r}: use 1-40 letters, digits, '_' or '-'")
    if args.actions:
        return args.actions
    if not args.annotator:
        return actions
    path = Path(actions)
    return str(path.with_name(f"{path.stem}.{args.annotator}{path.suffix}"))


def paths(args: argparse.Namespace) -> Paths:
    """The page's files (and its frame cache's size): the options, else the config's
    (validated; ValueError names a bad one)."""
    cfg = config.load(args.configfile, overrides={"results": args.results, "filter.screening": args.screening,
                                                  "export.label_map": args.label_map,
                                                  "annotate.detections": getattr(args, "suggest", None),
                                                  "annotate.detection_score": getattr(args, "suggest_score", None)})
    actions = actions_path(args, cfg["export"]["actions"])
    reviews = args.vqa_reviews or (str(Path(actions).parent / "vqa_reviews.json") if args.actions
                                   else cfg["vqa"]["reviews"])
    return Paths(results=cfg["results"], actions=actions, screening=cfg["filter"]["screening"],
                 label_map=cfg["export"]["label_map"], vqa_reviews=reviews,
                 frame_cache_mb=cfg["annotate"]["frame_cache_mb"], suggestions=cfg["annotate"]["suggestions"],
                 detections=detection_settings(cfg))


def detection_settings(cfg: dict) -> dict:
    """The page's detection suggestions as the config says (detection_suggestions.from_config's keywords)."""
    a = cfg["annotate"]
    return {"detections": a["detections"], "score": a["detection_score"], "iou_min": a["detection_iou"]}
