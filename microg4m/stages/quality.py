"""Quality stage: the scores of every ok clip of a unit (microg4m.formats.quality).

Each clip is decoded once. Every ``every``-th frame (1, 1 + every, ...) is scaled so that
its longer side is ``size`` pixels and scored for camera motion (microg4m.common.camera_motion,
between consecutive scored frames), sharpness and exposure (microg4m.common.image_quality);
every ``text_every``-th frame is searched for burnt-in text at the same size
(microg4m.engines.text_detector). The transitions come from the scenes stage's table. The
stage only scores: the filter decides (``filter.max_text_share`` ... ; all off by default).
"""

from __future__ import annotations

import os

import cv2
import numpy as np

from microg4m.common import camera_motion, image_quality
from microg4m.common.media import MediaError
from microg4m.common.progress import progress
from microg4m.formats import manifest as mf
from microg4m.formats.quality import write_quality
from microg4m.formats.scenes import read_scenes


def check(every: int = 6, text_every: int = 45, size: int = 320, text_min_area: float = 0.01,
          camera_static: float = 0.001, camera_shake: float = 0.5) -> None:
    """Raise ValueError naming the first bad setting."""
    for name, value, low in (("every", every, 1), ("text_every", text_every, 1), ("size", size, 32)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"quality.{name} = {value!r}: expected an integer >= {low}")
    for name, value in (("text_min_area", text_min_area), ("camera_static", camera_static),
                        ("camera_shake", camera_shake)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"quality.{name} = {value!r}: expected a number in [0, 1]")


def sampled_frames(path: str | os.PathLike, every: int, text_every: int, threads: int = 1):
    """Decode the clip once (on ``threads`` threads); yield ``(n, frame, scored, text)`` for
    the frames needed (1-based n): ``scored`` every ``every``-th frame, ``text`` every
    ``text_every``-th."""
    cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG, [cv2.CAP_PROP_N_THREADS, int(threads)])
    if not cap.isOpened():
        raise MediaError(f"{path}: cannot open video for the quality scores")
    try:
        n = 0
        while cap.grab():
            n += 1
            scored, text = (n - 1) % every == 0, (n - 1) % text_every == 0
            if scored or text:
                ok, frame = cap.retrieve()
                if not ok:
                    raise MediaError(f"{path}: frame {n} cannot be decoded for the quality scores")
                yield n, frame, scored, text
    finally:
        cap.release()


def clip_scores(path: str | os.PathLike, *, every: int = 6, text_every: int = 45, size: int = 320,
                text_min_area: float = 0.01, camera_static: float = 0.001, camera_shake: float = 0.5,
                threads: int = 1) -> dict:
    """The scores of one clip (the quality table's columns but clip_id and the transitions);
    ``threads``: the decoder's and the text detector's."""
    from microg4m.engines import text_detector

    grays, sharp, expo, clip, areas = [], [], [], [], []
    for _n, frame, scored, text in sampled_frames(path, every, text_every, threads):
        small = text_detector.scaled(frame, size)
        if scored:
            g = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
            grays.append(g)
            sharp.append(image_quality.sharpness(g))
            mean, clipped = image_quality.exposure(g)
            expo.append(mean)
            clip.append(clipped)
        if text:
            areas.append(text_detector.text_area(small, size, threads))
    if not grays:
        raise MediaError(f"{path}: no decodable frames for the quality scores")
    cam = camera_motion.camera_motion(grays, gap=every, static=camera_static, shake=camera_shake)
    areas = np.asarray(areas, float)
    return {"text_share": float((areas >= text_min_area).mean()), "text_area": float(areas.mean()),
            "camera": cam.kind, "camera_magnitude": cam.magnitude, "sharpness": float(np.mean(sharp)),
            "exposure": float(np.mean(expo)), "clipped": float(np.mean(clip))}


def run(manifest: str | os.PathLike, scenes: str | os.PathLike, out: str | os.PathLike, *, every: int = 5,
        text_every: int = 30, size: int = 320, text_min_area: float = 0.01, camera_static: float = 0.001,
        camera_shake: float = 0.5, threads: int = 1):
    """Score every ok clip of ``manifest``; write ``out`` (``quality/{unit}.tsv``) and return
    the table as written. ``scenes``: the unit's scenes table (the transitions)."""
    settings = dict(every=every, text_every=text_every, size=size, text_min_area=text_min_area,
                    camera_static=camera_static, camera_shake=camera_shake)
    check(**settings)
    cv2.setNumThreads(int(threads))
    cuts = read_scenes(scenes).set_index("clip_id")
    rows = []
    for clip in progress(list(mf.ok_clips(manifest)["clip_id"]), "quality"):
        if clip not in cuts.index:
            raise ValueError(f"{scenes}: no transitions for clip {clip} (scenes table out of date?)")
        path = mf.clip_file(manifest, clip)
        if not path.is_file():
            raise MediaError(f"{path}: clip {clip} listed as ok in {manifest} but the file is missing")
        rows.append({"clip_id": clip, "transitions": len(cuts.at[clip, "cuts"]),
                     "gradual": len(cuts.at[clip, "gradual"]), **clip_scores(path, threads=threads, **settings)})
    return write_quality(out, rows)
