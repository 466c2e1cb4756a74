"""The annotation web app (Flask) and its command line.

JSON API (errors are ``{"error": message}`` with a 4xx/5xx status; nothing is written):

* ``GET  /api/state``: label map, colours, files, and every clip with its persons,
  exclusion and whether it is done (excluded, or every person has an action).
* ``GET  /api/clips/<clip>``: one clip with its boxes per frame and its actions.
* ``POST /api/actions``: ``{clip_id, person_id, action, op: "add"|"remove"}``.
* ``POST /api/screening``: ``{clip_id, excluded: true|false, reason}``.
* ``GET  /clip/<clip>/frame/<n>.jpg`` (frame n, 1-based) and ``GET /clip/<clip>.mp4``.
* ``/api/vqa...``: the caption and QA-pair editors (vqa_routes.py).

POST bodies must be JSON (``Content-Type: application/json``): a plain form posted by
another web site cannot change the files. Requests whose ``Host`` is not an address the
server answers to, and posts from a foreign ``Origin``, are refused (guard.py).
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from flask import Flask, Response, jsonify, render_template, request, send_file
from werkzeug.exceptions import HTTPException

from microg4m.report import preview
from microg4m.formats.labels import MAX_ACTIONS
from microg4m.formats.labels import LABEL_TYPES, read_label_map
from .errors import Refused
from .frames import FrameCache
from .guard import LOOPBACK, allowed_hosts, install as install_guard
from .options import actions_path, add_arguments
from .results import Results
from .store import Store
from .vqa_routes import install as install_vqa
from .vqa_store import VQAStore

def palette_rgb() -> list[str]:
    """The preview colours (BGR there) as CSS colours, person n -> [(n - 1) % len]."""
    return [f"rgb({r},{g},{b})" for b, g, r in preview.PALETTE]


def create_app(results: str, actions: str, screening: str, label_map: str, annotator: str = "",
               hosts=LOOPBACK, vqa_reviews: str | None = None) -> Flask:
    """The app over a results folder; bad inputs raise ValueError before it serves.

    ``hosts``: the host names it answers to (see guard.py); others are refused.
    ``vqa_reviews``: the captions/QA reviews file (default: vqa_reviews.json beside the actions).
    """
    lmap = read_label_map(label_map)
    res = Results(results)
    store = Store(res, actions, screening, set(lmap["id"]))
    cache = FrameCache()
    app = Flask(__name__)
    app.json.sort_keys = False
    install_guard(app, hosts)
    install_vqa(app, res, VQAStore(res, vqa_reviews or Path(actions).parent / "vqa_reviews.json", annotator))

    @app.errorhandler(Refused)
    def refused(exc: Refused):
        return jsonify(error=exc.message), exc.status

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if exc.code == 404:
            return jsonify(error=f"no such page or file: {request.path}"), 404
        return jsonify(error=f"{exc.code} {exc.name}: {exc.description}"), exc.code

    def body() -> dict:
        data = request.get_json(silent=True) if request.is_json else None
        if not isinstance(data, dict):
            raise Refused(400, "expected a JSON object body (Content-Type: application/json)")
        return data

    def clip_state(clip, actions: dict, excluded: dict) -> dict:
        persons = res.persons(clip.clip_id)
        labelled = [p for p in persons if actions.get((clip.clip_id, p))]
        is_excluded = clip.clip_id in excluded
        return {
            "clip_id": clip.clip_id, "clip_type": clip.clip_type, "frames": clip.frames,
            "width": clip.width, "height": clip.height, "kept": clip.kept, "persons": persons,
            "labelled": len(labelled), "excluded": is_excluded, "reason": excluded.get(clip.clip_id, ""),
            "done": is_excluded or (bool(persons) and len(labelled) == len(persons)),
        }

    @app.get("/")
    def index():
        return render_template("index.html", annotator=annotator)

    @app.get("/favicon.ico")
    def favicon():
        return Response(status=204)

    @app.get("/api/state")
    def state():
        actions, excluded = store.actions(), store.excluded()
        clips = [clip_state(c, actions, excluded) for c in res.clips().values()]
        return jsonify(
            annotator=annotator, results=str(res.root), actions_file=str(store.actions_path),
            screening_file=str(store.screening_path), max_actions=MAX_ACTIONS, label_types=list(LABEL_TYPES),
            labels=[{"id": int(r.id), "name": r.name, "label_type": r.label_type} for r in lmap.itertuples()],
            colors=palette_rgb(), problems=res.problems(), clips=clips,
            done=sum(c["done"] for c in clips), total=len(clips),
        )

    @app.get("/api/clips/<clip_id>")
    def clip(clip_id: str):
        c = res.clip(clip_id)
        actions = store.actions(clip_id)
        out = clip_state(c, actions, store.excluded())
        out["boxes"] = {str(f): [list(b) for b in bs] for f, bs in sorted(res.boxes(clip_id).items())}
        out["actions"] = {str(p): actions.get((clip_id, p), []) for p in out["persons"]}
        return jsonify(out)

    @app.post("/api/actions")
    def change_action():
        data = body()
        op = data.get("op")
        if op not in ("add", "remove"):
            raise Refused(400, f"op must be 'add' or 'remove', got {op!r}")
        clip_id, pid, aid = data.get("clip_id"), data.get("person_id"), data.get("action")
        res.clip(clip_id)
        fn = store.add if op == "add" else store.remove
        return jsonify(clip_id=clip_id, person_id=pid, actions=fn(clip_id, pid, aid))

    @app.post("/api/screening")
    def screening():
        data = body()
        return jsonify(store.set_excluded(data.get("clip_id"), data.get("excluded"), data.get("reason", "")))

    @app.get("/clip/<clip_id>/frame/<int:n>.jpg")
    def frame(clip_id: str, n: int):
        c = res.clip(clip_id)
        resp = Response(cache.frame(_inside(c.path, res.root), n), mimetype="image/jpeg")
        resp.headers["Cache-Control"] = "no-cache"  # revalidate: a re-run may change the clip
        return resp

    @app.get("/clip/<clip_id>.mp4")
    def video(clip_id: str):
        path = _inside(res.clip(clip_id).path, res.root)
        if not path.is_file():
            raise Refused(404, f"clip file {path.name} not found")
        return send_file(path, mimetype="video/mp4", conditional=True)

    return app


def _inside(path: Path, root: Path) -> Path:
    """``path`` resolved, refused unless it lies inside ``root`` (the results folder)."""
    real = Path(path).resolve()
    if not real.is_relative_to(root):
        raise Refused(403, f"{path} is outside the results folder")
    return real


# ---------------------------------------------------------------- command line


def serve(args: argparse.Namespace) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM; see serving.py)."""
    app = create_app(args.results, actions_path(args), args.screening, args.label_map, args.annotator,
                     hosts=allowed_hosts(args.host, args.allowed_host), vqa_reviews=args.vqa_reviews)
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if not loopback:
        print(f"warning: serving on {args.host}: anyone who can reach it can change the label files",
              file=sys.stderr)
    from .serving import Server, run_until_signalled

    server = Server(app, args.host, args.port)  # waitress; SIGTERM or Ctrl-C stops it cleanly
    run_until_signalled(server, ready=lambda: print(
        f"microg4m annotate: http://{args.host}:{server.port}/  (Ctrl-C to stop)", flush=True))


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
