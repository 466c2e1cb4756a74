"""Command line of team mode, ``microg4m team COMMAND`` (no Flask import here).

File locations and k come from the workflow's config file (``--configfile``, default
``config/config.yaml`` when it exists; missing keys take the schema's defaults), so that
the final labels land where the workflow reads them: ``export.actions`` and
``filter.screening``. Options given on the command line win.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from microg4m import config
from ..options import detection_settings
from microg4m.config import DEFAULT_CONFIG


@dataclass(frozen=True)
class Settings:
    results: str
    database: str
    actions: str
    screening: str
    label_map: str
    report_dir: str
    per_clip: int
    session_hours: float
    vqa_reviews: str | None = None  # config vqa.reviews (None: vqa_reviews.json beside the actions)
    server: dict | None = None  # config team.server (threads, timeouts); None: the defaults
    passwords: dict | None = None  # config team.passwords (min_length, min_strength); None: the defaults
    login: dict | None = None  # config team.login (throttling); None: the defaults
    frame_cache_mb: int | None = None  # config annotate.frame_cache_mb; None: the schema's default
    suggestions: bool = True  # config annotate.suggestions
    detections: dict | None = None  # config annotate.detections and its thresholds (options.detection_settings)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", default=None,
                   help=f"workflow config to read the paths and team settings from (default: {DEFAULT_CONFIG} "
                        f"when it exists)")
    p.add_argument("--results", default=None, help="results folder of a run (config: results)")
    p.add_argument("--database", default=None, help="team database (config: team.database)")
    p.add_argument("--actions", default=None, help="final actions CSV (config: export.actions)")
    p.add_argument("--screening", default=None, help="final screening file (config: filter.screening)")
    p.add_argument("--label-map", default=None, help="label map (config: export.label_map)")
    p.add_argument("--report-dir", default=None, help="folder of the agreement report (config: team.report_dir)")
    p.add_argument("--per-clip", type=int, default=None, metavar="K",
                   help="annotators per clip (config: team.annotators_per_clip)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="team_command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="serve the team pages (login, annotation, adjudication)")
    _common(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1; put a TLS reverse "
                                                         "proxy in front, see docs/team.md)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="host name the proxy forwards (its server_name); other Host headers are refused")
    p.add_argument("--session-hours", type=float, default=None, help="login lifetime (config: team.session_hours)")
    p.add_argument("--threads", type=int, default=None,
                   help="requests answered at once (config: team.server.threads)")
    p.add_argument("--trusted-proxy", default=None, metavar="ADDR",
                   help="address of the TLS reverse proxy whose X-Forwarded-For/-Proto headers are believed "
                        "(config: team.server.trusted_proxy; docs/team.md)")

    p = sub.add_parser("user", help="manage accounts: add, passwd, disable, enable, unlock, list")
    _common(p)
    p.add_argument("action", choices=["add", "passwd", "disable", "enable", "unlock", "list"],
                   help="unlock NAME: lift a login lock (failed logins) of the account, or of an address "
                        "given as address:ADDR")
    p.add_argument("name", nargs="?")
    p.add_argument("--role", choices=["annotator", "adjudicator"], default="annotator")
    p.add_argument("--password-stdin", action="store_true",
                   help="read the password from the first line of stdin (else it is asked twice)")

    for name, text in (("assign", "assign the kept clips that lack annotators (also done by serve)"),
                       ("status", "clips per status and each annotator's progress"),
                       ("report", "write the agreement report"),
                       ("history", "print the history as TSV")):
        p = sub.add_parser(name, help=text)
        _common(p)
        if name == "history":
            p.add_argument("--since", type=int, default=0, help="only rows after this seq")
            p.add_argument("--clip", default=None), p.add_argument("--who", default=None)

    p = sub.add_parser("backup", help="copy the database (consistent while the server runs)")
    _common(p)
    p.add_argument("dest", help="file to write (must not exist)")

    p = sub.add_parser("rebuild", help="replay the history and rewrite the workflow's files (and the report)")
    _common(p)
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when a file differs from what the history gives")


# option -> the config setting it overrides
_SETTINGS = {"results": "results", "database": "team.database", "actions": "export.actions",
             "screening": "filter.screening", "label_map": "export.label_map", "report_dir": "team.report_dir",
             "per_clip": "team.annotators_per_clip", "session_hours": "team.session_hours",
             "vqa_reviews": "vqa.reviews", "threads": "team.server.threads",
             "trusted_proxy": "team.server.trusted_proxy"}


def settings(args: argparse.Namespace) -> Settings:
    """Settings from the config file (validated, the schema's defaults filled in) with the
    options given on the command line in their place; ValueError names a bad setting."""
    cfg = config.load(args.configfile,
                      overrides={key: getattr(args, option, None) for option, key in _SETTINGS.items()})
    team = cfg["team"]
    return Settings(results=cfg["results"], database=team["database"], actions=cfg["export"]["actions"],
                    screening=cfg["filter"]["screening"], label_map=cfg["export"]["label_map"],
                    report_dir=team["report_dir"], per_clip=team["annotators_per_clip"],
                    session_hours=team["session_hours"], vqa_reviews=cfg["vqa"]["reviews"],
                    server=dict(team["server"]), passwords=dict(team["passwords"]), login=dict(team["login"]),
                    frame_cache_mb=cfg["annotate"]["frame_cache_mb"], suggestions=cfg["annotate"]["suggestions"],
                    detections=detection_settings(cfg))
