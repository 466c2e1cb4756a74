"""Frame serving of the annotation page at a team's scale (microg4m/annotate/frames.py).

Real clips (the dancer footage, H.264) and real decodes: the decoder function
``frames.iter_frames`` is wrapped to count the decodes of each clip file and, where a
test says so, to hold a decode after its third frame. Over real HTTP (waitress in a
thread): two annotators opening the same evicted clip cause one decode; a decode in
progress holds up neither the frames already decoded nor other clips; the cache keeps at
most its bytes; the export's JPEG frames (the frames stage, real ffmpeg) are served as
they are, and a clip file made again afterwards is decoded, not served stale; a frame the
browser has (its entity tag) is answered 304 without a decode.
"""

from __future__ import annotations

import concurrent.futures as futures
import dataclasses
import http.client
import os
import threading
import time
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import pytest

from microg4m.annotate import frames
from microg4m.annotate.app import create_app
from microg4m.annotate.team.server import create_app as team_app
from microg4m.common.media import read_frames
from microg4m.formats.results_index import ResultsIndex
from microg4m.stages import frames as frames_stage

from team_setup import Client, make_project, serving
from test_annotate_store import LABEL_MAP, bearer, clip_video, copies_of, make_app, token_client  # noqa: F401  (clip_video: a fixture)

CLIPS_ON_PAGE = ("dancer_000", "dancer_001", "film_000", "film_001")


class Decodes:
    """Counts the real decodes per clip file (by stem); ``hold(stem)`` stops that clip's
    decode after its third frame until ``release``."""

    def __init__(self, monkeypatch):
        self.count: Counter = Counter()
        self.gates: dict[str, threading.Event] = {}
        real = frames.iter_frames

        def counted(path, *a, **kw):
            stem = Path(path).stem
            self.count[stem] += 1
            for i, img in enumerate(real(path, *a, **kw)):
                if i == 3 and stem in self.gates:
                    self.gates[stem].wait(60)
                yield img

        monkeypatch.setattr(frames, "iter_frames", counted)

    def hold(self, stem: str) -> threading.Event:
        self.gates[stem] = threading.Event()
        return self.gates[stem]

    def release(self) -> None:
        for gate in self.gates.values():
            gate.set()


@pytest.fixture
def decodes(monkeypatch):
    d = Decodes(monkeypatch)
    yield d
    d.release()


def get(port: int, path: str, client: Client | dict | None = None, timeout: float = 60) -> tuple[int, bytes]:
    """GET with a team ``client``'s session cookie, or with ``client`` as headers (the single-user token)."""
    headers = {"Host": f"127.0.0.1:{port}"}
    if isinstance(client, dict):
        headers.update(client)
    elif client is not None:
        headers["Cookie"] = client.cookie
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def image(data: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR).astype(int)


def decoded(path: Path, n: int) -> np.ndarray:
    """Frame n of the clip, decoded here (not counted)."""
    return read_frames(path)[n - 1].astype(int)


def settled(cache: frames.FrameCache, timeout: float = 30) -> list[str]:
    """The clips kept once no decode runs (a frame is answered before its clip's decode ends)."""
    deadline = time.monotonic() + timeout
    while cache._running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not cache._running, "decodes still running"
    return cache.kept()


def clip_path(res: Path, clip_id: str) -> Path:
    """Where the clip's mp4 is (its unit's folder), through the results index."""
    return ResultsIndex(res).clip(clip_id).path


def clip_bytes(path: Path) -> int:
    return sum(len(b) for b in frames.decode_jpegs(path))


# ---------------------------------------------------------------- one decode per clip, no global lock


def test_two_annotators_opening_the_same_evicted_clip_cause_one_decode(tmp_path, clip_video, decodes):
    video, size = clip_video
    project = make_project(tmp_path, clip_maker=copies_of(video, size), size=size)  # alice and bob: every clip
    app = team_app(project, {"127.0.0.1"})
    cache = app.extensions["microg4m.frames"]
    cache.max_bytes = int(1.5 * clip_bytes(video))  # room for one clip: opening another evicts it
    with serving(app) as port:
        alice, bob = Client(port).login("alice"), Client(port).login("bob")
        assert get(port, "/clip/dancer_000/frame/1.jpg", alice)[0] == 200
        settled(cache)
        assert get(port, "/clip/film_000/frame/1.jpg", alice)[0] == 200
        assert settled(cache) == [str(clip_path(tmp_path / "results", "film_000"))]  # dancer_000 evicted
        before = decodes.count["dancer_000"]
        # both open the evicted clip at once, as the page does: every frame, from 6 connections each
        asks = [(who, n) for n in range(1, 91) for who in (alice, bob)]
        with futures.ThreadPoolExecutor(12) as pool:
            got = list(pool.map(lambda a: get(port, f"/clip/dancer_000/frame/{a[1]}.jpg", a[0]), asks))
    assert [s for s, _ in got] == [200] * len(asks)
    assert decodes.count["dancer_000"] - before == 1  # one decode, not two
    by_frame = {}
    for (who, n), (_, data) in zip(asks, got):
        assert by_frame.setdefault(n, data) == data  # both annotators saw the same JPEG
    assert np.abs(image(by_frame[45]) - decoded(video, 45)).mean() < 4


def test_a_decode_holds_up_neither_its_decoded_frames_nor_other_clips(tmp_path, clip_video, decodes):
    app, res, _ = make_app(tmp_path, clip_video)
    token = bearer(app)
    with serving(app) as port, futures.ThreadPoolExecutor(4) as pool:
        assert get(port, "/clip/film_000/frame/1.jpg", token)[0] == 200  # decoded and kept
        gate = decodes.hold("dancer_000")  # its decode stops after frame 3
        late = pool.submit(get, port, "/clip/dancer_000/frame/60.jpg", token)
        early = pool.submit(get, port, "/clip/dancer_000/frame/2.jpg", token)
        other = pool.submit(get, port, "/clip/film_000/frame/30.jpg", token)
        fresh = pool.submit(get, port, "/clip/dancer_001/frame/5.jpg", token)  # a second decode beside the held one
        try:
            assert early.result(timeout=30)[0] == 200  # frame 2 is decoded: answered during the decode
            assert other.result(timeout=30)[0] == 200  # another clip's frames do not wait for it
            assert fresh.result(timeout=30)[0] == 200
            assert not late.done()
        finally:
            gate.set()
        status, data = late.result(timeout=60)
    assert status == 200 and np.abs(image(data) - decoded(clip_video[0], 60)).mean() < 4
    assert [decodes.count[c] for c in CLIPS_ON_PAGE] == [1, 1, 1, 0]


def test_the_cache_keeps_at_most_its_bytes(tmp_path, clip_video):
    video, _ = clip_video
    paths = []
    for i in range(5):
        paths.append(tmp_path / f"c{i}.mp4")
        os.link(video, paths[-1])
    one = clip_bytes(video)
    cache = frames.FrameCache(max_bytes=int(2.5 * one))
    held, stop = [], threading.Event()
    watch = threading.Thread(target=lambda: [held.append(cache.nbytes) or time.sleep(0.001)
                                             for _ in iter(stop.is_set, True)])
    watch.start()  # the bytes held, also while a clip is being decoded
    try:
        for i, p in enumerate(paths):
            assert cache.frame(p, 1)
            assert settled(cache) == [str(q) for q in paths[max(0, i - 1): i + 1]]  # the two most recent
    finally:
        stop.set()
        watch.join()
    assert len(held) > 100 and max(held) <= cache.max_bytes
    assert cache.nbytes == 2 * one
    cache.frame(paths[3], 10)  # used again: now the most recent, paths[4] goes first
    cache.frame(paths[0], 10)
    assert settled(cache) == [str(paths[3]), str(paths[0])]
    small = frames.FrameCache(max_bytes=one // 2)  # a clip larger than the cache: served, not kept
    assert np.abs(image(small.frame(paths[0], 45)) - decoded(video, 45)).mean() < 4
    assert (settled(small), small.nbytes) == ([], 0)
    with pytest.raises(frames.Refused, match="frame 91 out of range: c0 has 90 frames"):
        cache.frame(paths[0], 91)


def test_a_clip_that_cannot_be_decoded_is_an_error_and_nothing_is_kept(tmp_path, clip_video):
    app, res, _ = make_app(tmp_path, clip_video)
    c = token_client(app)
    clip = clip_path(res, "dancer_001")
    good = clip.read_bytes()
    clip.write_bytes(b"not a video at all")
    r = c.get("/clip/dancer_001/frame/1.jpg")
    assert r.status_code == 500 and r.get_json()["error"].startswith("dancer_001.mp4: cannot be decoded (MediaError")
    cache = app.extensions["microg4m.frames"]
    assert (settled(cache), cache.nbytes) == ([], 0)
    clip.write_bytes(good)  # mended: decoded now, the error was not kept
    assert c.get("/clip/dancer_001/frame/1.jpg").status_code == 200


# ---------------------------------------------------------------- the export's JPEG frames


def export_frames(res: Path) -> ResultsIndex:
    """The frames stage over each unit of the results folder (real ffmpeg), as the workflow runs it."""
    index = ResultsIndex(res)
    for unit in index.units():
        f = index.files(unit)
        frames_stage.run(f.manifest, f.decisions, f.frames_dir, f.frames_done)
    return index


def test_the_exports_jpeg_frames_are_served_without_decoding(tmp_path, clip_video, decodes):
    app, res, _ = make_app(tmp_path, clip_video)
    c = token_client(app)
    before = {n: c.get(f"/clip/dancer_000/frame/{n}.jpg").data for n in (1, 45, 90)}  # decoded, as before
    out = export_frames(res)
    decodes.count.clear()
    ann = tmp_path / "annotations"  # a fresh server over the folder with its frames
    c = token_client(create_app(str(res), str(ann / "actions.csv"), str(ann / "screening_excluded.txt"), str(LABEL_MAP)))
    for n, shown in before.items():
        r = c.get(f"/clip/dancer_000/frame/{n}.jpg")
        assert r.status_code == 200 and r.mimetype == "image/jpeg"
        assert r.data == (out.clip_files("dancer_000").frames_dir / f"dancer_000_{n:06d}.jpg").read_bytes()  # the file's bytes
        assert np.abs(image(r.data) - image(shown)).mean() < 4  # the frame the page showed before
    assert c.get("/clip/dancer_000/frame/91.jpg").status_code == 404
    assert decodes.count["dancer_000"] == 1  # only to answer frame 91 (no such file): none for the others


def test_a_clip_made_again_is_not_served_stale(tmp_path, clip_video, decodes):
    video, size = clip_video
    app, res, _ = make_app(tmp_path, clip_video)
    c = token_client(app)
    clip = clip_path(res, "dancer_001")
    first = c.get("/clip/dancer_001/frame/1.jpg").data
    # a re-run makes the clip again from later footage (same name, size of frame): decoded anew
    from conftest import get_footage, make_clip

    again = make_clip(get_footage("dancer"), tmp_path / "later.mp4", start=4.0, extra=("-vf", f"scale={size[0]}:-2"))
    os.replace(again, clip)
    second = c.get("/clip/dancer_001/frame/1.jpg").data
    assert np.abs(image(second) - decoded(clip, 1)).mean() < 4
    assert np.abs(image(first) - decoded(clip, 1)).mean() > 3 * np.abs(image(second) - decoded(clip, 1)).mean()
    assert decodes.count["dancer_001"] == 2
    # the export's JPEG frames, then the clip made again: the JPEGs are older than the clip, not used
    out = export_frames(res)
    exported = c.get("/clip/dancer_001/frame/1.jpg").data
    assert exported == (out.clip_files("dancer_001").frames_dir / "dancer_001_000001.jpg").read_bytes()
    again = make_clip(get_footage("dancer"), tmp_path / "first.mp4", extra=("-vf", f"scale={size[0]}:-2"))
    os.replace(again, clip)
    third = c.get("/clip/dancer_001/frame/1.jpg").data
    assert third != exported and np.abs(image(third) - decoded(clip, 1)).mean() < 4
    assert np.abs(image(exported) - decoded(clip, 1)).mean() > 3 * np.abs(image(third) - decoded(clip, 1)).mean()


def test_a_frame_the_browser_has_is_answered_304_without_a_read_or_a_decode(tmp_path, clip_video, decodes):
    """The page's frames carry an entity tag made from stamps; a browser that sends it back
    gets 304 and costs nothing, until the clip (or the export's frame) is made again."""
    video, size = clip_video
    app, res, ann = make_app(tmp_path, clip_video)
    first = token_client(app).get("/clip/dancer_001/frame/5.jpg")
    tag = first.headers["ETag"]
    assert first.status_code == 200 and tag and decodes.count["dancer_001"] == 1

    def again(etag: str):  # a fresh server (nothing cached): only the tag can spare a decode
        c = token_client(create_app(str(res), str(ann / "actions.csv"), str(ann / "screening_excluded.txt"),
                                    str(LABEL_MAP)))
        return c.get("/clip/dancer_001/frame/5.jpg", headers={"If-None-Match": etag})

    r = again(tag)
    assert (r.status_code, r.data, r.headers["ETag"]) == (304, b"", tag)
    assert decodes.count["dancer_001"] == 1  # nothing decoded
    assert again('"another"').status_code == 200 and decodes.count["dancer_001"] == 2
    # a re-run makes the clip again: the old tag no longer matches
    from conftest import get_footage, make_clip

    os.replace(make_clip(get_footage("dancer"), tmp_path / "later.mp4", start=4.0,
                         extra=("-vf", f"scale={size[0]}:-2")), clip_path(res, "dancer_001"))
    r = again(tag)
    assert r.status_code == 200 and r.headers["ETag"] != tag and r.data != first.data
    # the export's JPEG frames: the file's own tag
    out = export_frames(res)
    r = again(r.headers["ETag"])
    assert r.status_code == 200 and r.data == (out.clip_files("dancer_001").frames_dir / "dancer_001_000005.jpg").read_bytes()
    decoded_so_far = decodes.count["dancer_001"]
    assert again(r.headers["ETag"]).status_code == 304 and decodes.count["dancer_001"] == decoded_so_far


def test_the_frame_cache_size_is_a_setting(tmp_path, clip_video):
    app, _, _ = make_app(tmp_path, clip_video)
    assert app.extensions["microg4m.frames"].max_bytes == frames.default_max_bytes() == 256 << 20
    res = tmp_path / "results"
    small = create_app(str(res), str(tmp_path / "a.csv"), str(tmp_path / "s.txt"), str(LABEL_MAP), frame_cache_mb=32)
    assert small.extensions["microg4m.frames"].max_bytes == 32 << 20
    project = make_project(tmp_path / "team", results=res)
    project.settings = dataclasses.replace(project.settings, frame_cache_mb=48)
    assert team_app(project, {"127.0.0.1"}).extensions["microg4m.frames"].max_bytes == 48 << 20


# ---------------------------------------------------------------- every frame in one answer


def split_frames(r) -> list[bytes]:
    """The JPEGs of a ``GET /clip/<clip>/frames`` answer, as the page splits them (page.js)."""
    lengths = [int(n) for n in r.headers["X-Frame-Lengths"].split(",")]
    assert sum(lengths) == len(r.data)
    offsets = np.cumsum([0, *lengths])
    return [r.data[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


def test_the_pages_one_request_per_clip_gives_every_frame_as_the_frame_route_does(tmp_path, clip_video, decodes):
    """What the pages load (GET /clip/<clip>/frames) is frame 1..90 of the frame route, byte
    for byte, decoded or from the export's JPEGs; one decode; answered 304 with its tag."""
    app, res, ann = make_app(tmp_path, clip_video)
    c = token_client(app)
    r = c.get("/clip/dancer_001/frames")
    assert r.status_code == 200 and r.headers["Cache-Control"] == "no-cache"
    got = split_frames(r)
    assert len(got) == 90 and got == [c.get(f"/clip/dancer_001/frame/{n}.jpg").data for n in range(1, 91)]
    assert decodes.count["dancer_001"] == 1
    assert np.abs(image(got[44]) - decoded(clip_path(res, "dancer_001"), 45)).mean() < 4
    assert c.get("/clip/dancer_001/frames", headers={"If-None-Match": r.headers["ETag"]}).status_code == 304
    out = export_frames(res)  # the export's JPEGs: their bytes, under a new tag
    r2 = token_client(create_app(str(res), str(ann / "actions.csv"), str(ann / "screening_excluded.txt"),
                                 str(LABEL_MAP))).get("/clip/dancer_001/frames", headers={"If-None-Match": r.headers["ETag"]})
    assert r2.status_code == 200 and r2.headers["ETag"] != r.headers["ETag"]
    assert split_frames(r2) == [(out.clip_files("dancer_001").frames_dir / f"dancer_001_{n:06d}.jpg").read_bytes()
                                for n in range(1, 91)]
    assert decodes.count["dancer_001"] == 1  # nothing decoded for them
    assert c.get("/clip/nosuch_000/frames").status_code == 404
