"""The annotation web app (Flask) and its command line.

JSON API (errors are ``{"error": message}`` with a 4xx/5xx status; nothing is written):

* ``GET  /api/state``: label map, colours, files, and a page of the clips, each with its
  persons, exclusion and whether it is done (excluded, or every person has an action);
  ``page``, ``around``, ``todo`` choose the page (pages.py).
* ``GET  /api/clips/<clip>``: one clip with its boxes per frame and its actions.
* ``POST /api/actions``: ``{clip_id, person_id, action, op: "add"|"remove"}``, or
  ``{clip_id, person_id, actions: [ids], op: "set"}`` (the person's whole set at once: a
  suggestion saved as the page shows it; suggestions.py). Answers the person's actions and
  the suggestion's ``outcome`` when the save changed the labels of a person with one.
* ``POST /api/screening``: ``{clip_id, excluded: true|false, reason}``.
* ``GET  /clip/<clip>/frame/<n>.jpg`` (frame n, 1-based) and ``GET /clip/<clip>.mp4``.
* ``/api/vqa...``: the caption and QA-pair editors (vqa_routes.py).

The errors, the JSON bodies, the clip state and the frame routes are those of api.py,
shared with team mode. Requests whose ``Host`` is not an address the server answers to,
posts from a foreign ``Origin``, and every request without the access token printed at
start (another account on the same machine can reach 127.0.0.1 too) are refused
(guard.py).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import secrets
import sys
from pathlib import Path

from flask import Flask, jsonify, render_template, request

from microg4m.formats.labels import LABEL_TYPES, MAX_ACTIONS, read_label_map
from .api import clip_boxes, clip_state, install_errors, install_media, json_body, json_with_clips, palette_rgb
from .errors import Refused
from .guard import LOOPBACK, allowed_hosts, install as install_guard, require_token
from .options import add_arguments, paths
from .pages import Listing, todo_page
from .results import Results
from .store import Store
from .detection_suggestions import from_config
from .suggestions import OutcomeLog, Suggestions
from .vqa_routes import install as install_vqa
from .vqa_store import VQAStore


def create_app(results: str, actions: str, screening: str, label_map: str, annotator: str = "",
               hosts=LOOPBACK, vqa_reviews: str | None = None, token: str | None = None,
               frame_cache_mb: int | None = None, suggestions: bool = True, detections: dict | None = None) -> Flask:
    """The app over a results folder; bad inputs raise ValueError before it serves.

    ``hosts``: the host names it answers to (see guard.py); others are refused.
    ``vqa_reviews``: the captions/QA reviews file (default: vqa_reviews.json beside the actions).
    ``token``: the access token every request must carry (guard.require_token); a random
    one when not given, in ``app.config["ACCESS_TOKEN"]``.
    ``frame_cache_mb``: MiB of decoded frames kept (config ``annotate.frame_cache_mb``; None: its default).
    ``suggestions``: show the VLM's answers as suggestions (config ``annotate.suggestions``).
    ``detections``: an action model's detections as suggestions: ``{"path", "score", "iou"}``
    (``--suggest``; config ``annotate.detections``, detection_suggestions.py).
    """
    lmap = read_label_map(label_map)
    res = Results(results)
    store = Store(res, actions, screening, set(lmap["id"]))
    outcomes = OutcomeLog(actions, annotator)
    detected = from_config(res, label_map, lmap, **(detections or {"detections": None}))
    suggestions = Suggestions(res, set(lmap["id"]), enabled=suggestions, detections=detected)
    app = Flask(__name__)
    app.json.sort_keys = False
    app.config["ACCESS_TOKEN"] = token = token or new_token()
    install_guard(app, hosts)
    require_token(app, token)
    install_errors(app)
    install_vqa(app, res, VQAStore(res, vqa_reviews or Path(actions).parent / "vqa_reviews.json", annotator))

    @app.get("/")
    def index():
        return render_template("index.html", annotator=annotator)

    labels = [{"id": int(r.id), "name": r.name, "label_type": r.label_type} for r in lmap.itertuples()]
    listed: list = [None]  # (the index's token, the labels, the exclusions, the clips' Listing, done)

    @app.get("/api/state")
    def state():
        view, actions, excluded = res.view(), store.actions(), store.excluded()
        got = listed[0]  # made again only when the clips, their persons or a label file changed
        if got is None or got[0] != view.token or got[1] is not actions or got[2] is not excluded:
            ids = list(view.clips)
            clips = [clip_state(view.clips[cid], view.persons(cid), actions, excluded) for cid in ids]
            listing = Listing(ids, [json.dumps(c, separators=(",", ":")) for c in clips], [c["done"] for c in clips])
            got = listed[0] = (view.token, actions, excluded, listing, sum(listing.flags))
        listing, done = got[3:]
        text, where = todo_page(listing, request.args)  # one page of the clips (pages.py)
        return json_with_clips(dict(
            annotator=annotator, results=str(res.root), actions_file=str(store.actions_path),
            screening_file=str(store.screening_path), max_actions=MAX_ACTIONS, label_types=list(LABEL_TYPES),
            labels=labels, colors=palette_rgb(), problems=res.problems() + suggestions.problems(), done=done,
            total=len(listing.ids), suggestions=outcomes.summary(), **where), text)

    @app.get("/api/clips/<clip_id>")
    def clip(clip_id: str):
        c = res.clip(clip_id)
        actions = store.actions(clip_id)
        out = clip_state(c, res.persons(c.clip_id), actions, store.excluded())
        out["boxes"] = clip_boxes(res, clip_id)
        out["actions"] = {str(p): actions.get((clip_id, p), []) for p in out["persons"]}
        out["suggestions"] = suggestions.of_clip(clip_id, out["persons"])
        return jsonify(out)

    @app.post("/api/actions")
    def change_action():
        data = json_body()
        op = data.get("op")
        if op not in ("add", "remove", "set"):
            raise Refused(400, f"op must be 'add', 'remove' or 'set', got {op!r}")
        clip_id, pid, aid = data.get("clip_id"), data.get("person_id"), data.get("action")
        res.clip(clip_id)
        hint = suggestions.get(clip_id, pid)
        before = store.actions(clip_id).get((clip_id, pid), []) if hint else None
        if op == "set":
            acts = store.replace(clip_id, pid, data.get("actions"))
        else:
            acts = (store.add if op == "add" else store.remove)(clip_id, pid, aid)
        result = outcomes.record(clip_id, pid, hint, acts) if hint and set(acts) != set(before) else None
        return jsonify(clip_id=clip_id, person_id=pid, actions=acts, outcome=result)

    @app.post("/api/screening")
    def screening():
        data = json_body()
        return jsonify(store.set_excluded(data.get("clip_id"), data.get("excluded"), data.get("reason", "")))

    install_media(app, res, res.clip, cache_control="no-cache",
                  frame_cache_bytes=None if frame_cache_mb is None else frame_cache_mb << 20)
    return app


# ---------------------------------------------------------------- command line


def new_token() -> str:
    """A random access token (256 bits)."""
    return secrets.token_urlsafe(32)


def serve(args: argparse.Namespace) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM; see serving.py). Prints the page's
    address with its access token (``/?token=...``): only who can read it gets in."""
    files = paths(args)
    app = create_app(files.results, files.actions, files.screening, files.label_map, args.annotator,
                     hosts=allowed_hosts(args.host, args.allowed_host), vqa_reviews=files.vqa_reviews,
                     frame_cache_mb=files.frame_cache_mb, suggestions=files.suggestions,
                     detections=files.detections)
    token = app.config["ACCESS_TOKEN"]
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if not loopback:
        print(f"warning: serving on {args.host} over plain HTTP: the access token crosses the network "
              f"unencrypted (anyone who sees it can change the label files); prefer SSH port forwarding "
              f"or a TLS proxy (--trusted-proxy)", file=sys.stderr)
    from .serving import Server, ServerSettings, run_until_signalled

    # waitress; SIGTERM or Ctrl-C stops it cleanly
    server = Server(app, args.host, args.port, ServerSettings(trusted_proxy=args.trusted_proxy))
    host = f"[{args.host}]" if ":" in args.host else args.host
    run_until_signalled(server, ready=lambda: print(
        f"microg4m annotate: http://{host}:{server.port}/?token={token}  (Ctrl-C to stop)", flush=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m microg4m.annotate", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        serve(args)
    except (ValueError, OSError) as exc:
        print(f"microg4m annotate: error: {exc}", file=sys.stderr)
        return 1
    return 0
