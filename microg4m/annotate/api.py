"""What the single-user page (app.py) and team mode (team/server.py) share: JSON errors,
the JSON body of a post, a clip's state and boxes, and the frame and video routes.

Errors are ``{"error": message}`` with a 4xx/5xx status. POST bodies must be JSON
(``Content-Type: application/json``): a plain form posted by another web site cannot
change the files; nested at most ``guard.MAX_JSON_DEPTH`` deep.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

from flask import Flask, Response, jsonify, request, send_file
from werkzeug.exceptions import HTTPException

from microg4m.formats.frame_lists import FRAME_TMPL
from microg4m.report import preview
from .errors import Refused
from .guard import MAX_JSON_DEPTH
from .frames import FrameCache
from .results import Results


def install_errors(app: Flask) -> None:
    """Every refusal and every HTTP error as JSON."""

    @app.errorhandler(Refused)
    def refused(exc: Refused):
        return jsonify(error=exc.message), exc.status

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if exc.code == 404:
            return jsonify(error=f"no such page or file: {request.path}"), 404
        return jsonify(error=f"{exc.code} {exc.name}: {exc.description}"), exc.code

    @app.get("/favicon.ico")
    def favicon():
        return Response(status=204)


def json_body() -> dict:
    """The request's JSON object; Refused (400) for anything else, and for one nested more
    than MAX_JSON_DEPTH deep (the body's size is limited by guard.py)."""
    try:
        data = request.get_json(silent=True) if request.is_json else None
    except RecursionError:  # Python's parser gives up on very deep nesting
        data = None
    if not isinstance(data, dict):
        raise Refused(400, "expected a JSON object body (Content-Type: application/json) "
                           f"nested at most {MAX_JSON_DEPTH} deep")
    if json_depth(data) > MAX_JSON_DEPTH:
        raise Refused(400, f"the JSON body is nested more than {MAX_JSON_DEPTH} deep")
    return data


def json_depth(value) -> int:
    """How deep lists and objects nest in a parsed JSON value (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is not None:
            deepest = max(deepest, d)
            stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def palette_rgb() -> list[str]:
    """The preview colours (BGR there) as CSS colours, person n -> [(n - 1) % len]."""
    return [f"rgb({r},{g},{b})" for b, g, r in preview.PALETTE]


def clip_state(clip, persons: list[int], actions: dict, excluded: dict) -> dict:
    """A clip as the page lists it: its ``persons``, how many have an action (``actions``:
    (clip, person) -> ids), its exclusion (``excluded``: clip -> reason) and whether it is
    done (excluded, or every person has an action)."""
    labelled = [p for p in persons if actions.get((clip.clip_id, p))]
    is_excluded = clip.clip_id in excluded
    return {
        "clip_id": clip.clip_id, "clip_type": clip.clip_type, "frames": clip.frames,
        "width": clip.width, "height": clip.height, "kept": clip.kept, "persons": persons,
        "labelled": len(labelled), "excluded": is_excluded, "reason": excluded.get(clip.clip_id, ""),
        "done": is_excluded or (bool(persons) and len(labelled) == len(persons)),
    }


def clip_boxes(res: Results, clip_id: str) -> dict:
    """Frame -> the tracked boxes drawn on it, as JSON keys and lists."""
    return {str(f): [list(b) for b in bs] for f, bs in sorted(res.boxes(clip_id).items())}


def json_with_clips(head: dict, clips: str) -> Response:
    """``head`` as a JSON object with ``"clips"``: the JSON array text ``clips`` (a list kept
    between requests as text, not encoded again)."""
    text = json.dumps(head, separators=(",", ":"))
    return Response(f'{text[:-1]},"clips":{clips}}}', mimetype="application/json")


def inside(path: Path, root: Path) -> Path:
    """``path`` resolved, refused unless it lies inside ``root`` (the results folder)."""
    real = Path(path).resolve()
    if not real.is_relative_to(root):
        raise Refused(403, f"{path} is outside the results folder")
    return real


def exported_frame(res: Results, clip_id: str, n: int) -> Path | None:
    """Where the export's JPEG of frame ``n`` of the clip is (its ``frames_dir`` in the results
    index, the frames stage's layout), or None when that path leads outside the results folder."""
    real = (res.index.clip_files(clip_id).frames_dir / FRAME_TMPL.format(clip=clip_id, n=n)).resolve()
    return real if real.is_relative_to(res.root) else None


def install_media(app: Flask, res: Results, readable: Callable, cache_control: str,
                  frame_cache_bytes: int | None = None) -> FrameCache:
    """``GET /clip/<clip>/frame/<n>.jpg`` (frame n, 1-based), ``GET /clip/<clip>/frames``
    (every frame in one answer: what the pages load) and ``GET /clip/<clip>.mp4`` for the
    clips ``readable(clip_id)`` returns (it raises Refused for the others). The frames come
    from one :class:`FrameCache` of ``frame_cache_bytes`` (None: the schema's default), also
    kept as ``app.extensions["microg4m.frames"]``."""
    cache = app.extensions["microg4m.frames"] = FrameCache(frame_cache_bytes)

    @app.get("/clip/<clip_id>/frame/<int:n>.jpg")
    def frame(clip_id: str, n: int):
        c = readable(clip_id)
        found = cache.lookup(inside(c.path, res.root), n, exported_frame(res, c.clip_id, n))
        if request.if_none_match.contains_weak(found.etag):
            resp = Response(status=304)  # the browser has it: nothing read, nothing decoded
        else:
            resp = Response(found.read(), mimetype="image/jpeg")
        resp.set_etag(found.etag)
        resp.headers["Cache-Control"] = cache_control  # revalidate: a re-run may change the clip
        return resp

    @app.get("/clip/<clip_id>/frames")
    def frames(clip_id: str):
        """Every frame of the clip in one answer, as the pages load a clip: the JPEGs one
        after another, their lengths in ``X-Frame-Lengths`` (frame 1 first); one entity tag
        over the frames' tags, so that a browser that has them is answered 304."""
        c = readable(clip_id)
        path = inside(c.path, res.root)
        found = [cache.lookup(path, n, exported_frame(res, c.clip_id, n)) for n in range(1, c.frames + 1)]
        etag = hashlib.sha1("\n".join(f.etag for f in found).encode()).hexdigest()
        if request.if_none_match.contains_weak(etag):
            resp = Response(status=304)
        else:
            jpegs = [f.read() for f in found]
            resp = Response(b"".join(jpegs), mimetype="application/octet-stream")
            resp.headers["X-Frame-Lengths"] = ",".join(str(len(j)) for j in jpegs)
        resp.set_etag(etag)
        resp.headers["Cache-Control"] = cache_control
        return resp

    @app.get("/clip/<clip_id>.mp4")
    def video(clip_id: str):
        path = inside(readable(clip_id).path, res.root)
        if not path.is_file():
            raise Refused(404, f"clip file {path.name} not found")
        return send_file(path, mimetype="video/mp4", conditional=True)

    return cache
