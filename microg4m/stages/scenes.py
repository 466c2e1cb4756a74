"""Scenes stage: shot cuts inside each ok clip of one source, with PySceneDetect.

PySceneDetect's default ``min_scene_len`` is 15 frames, and it also counts from the
first frame of the video, so a cut in the first half second of a 3 s clip would be
hidden. The setting ``scenes.min_scene_len`` (1 by default) makes every cut count.
"""

from __future__ import annotations

import os

import pandas as pd

from microg4m.common.progress import progress
from microg4m.formats import manifest as mf
from microg4m.common.atomic import write_tsv
from microg4m.common.media import MediaError
from microg4m.formats.scenes import COLUMNS, format_cuts

# detector name -> (class name in scenedetect, name of its main threshold argument)
DETECTORS = {
    "content": ("ContentDetector", "threshold"),
    "adaptive": ("AdaptiveDetector", "adaptive_threshold"),
    "threshold": ("ThresholdDetector", "threshold"),
    "hash": ("HashDetector", "threshold"),
    "histogram": ("HistogramDetector", "threshold"),
}
def make_detector(detector: str = "content", threshold: float = 40.0, min_scene_len: int = 1):
    """A fresh PySceneDetect detector (detectors keep state: one per clip)."""
    import scenedetect

    if detector not in DETECTORS:
        raise ValueError(f"scenes.detector = {detector!r}: expected one of {', '.join(DETECTORS)}")
    if not isinstance(min_scene_len, int) or min_scene_len < 1:
        raise ValueError(f"scenes.min_scene_len = {min_scene_len!r}: expected an integer >= 1 (frames)")
    cls_name, arg = DETECTORS[detector]
    return getattr(scenedetect, cls_name)(**{arg: float(threshold), "min_scene_len": min_scene_len})


def clip_cuts(path: str | os.PathLike, *, detector: str = "content", threshold: float = 40.0,
              min_scene_len: int = 1) -> list[int]:
    """1-based frame numbers at which a new shot starts inside the video at ``path``."""
    from scenedetect import SceneManager, open_video
    from scenedetect.video_stream import VideoOpenFailure

    det = make_detector(detector, threshold, min_scene_len)
    try:
        video = open_video(str(path), backend="opencv")
    except (VideoOpenFailure, OSError) as exc:
        raise MediaError(f"{path}: cannot open video for scene detection ({exc})") from None
    sm = SceneManager()
    sm.add_detector(det)
    sm.detect_scenes(video)
    scenes = sm.get_scene_list()
    if len(scenes) < 2:
        return []
    # Scene starts after the first are the cuts. Timecodes come from PTS, so count frames
    # from the first decoded frame (a clip's first PTS need not be 0).
    first = scenes[0][0].frame_num
    return sorted({start.frame_num - first + 1 for start, _ in scenes[1:]})


def run(manifest: str | os.PathLike, out: str | os.PathLike, *, detector: str = "content",
        threshold: float = 40.0, min_scene_len: int = 1) -> pd.DataFrame:
    """Cuts of every ok clip of ``manifest``; writes ``out`` (TSV ``clip_id, cuts``) and returns it."""
    make_detector(detector, threshold, min_scene_len)  # bad settings fail before any decoding
    rows = []
    for clip in progress(mf.ok_clips(manifest)["clip_id"], "scenes"):
        path = mf.clip_file(manifest, clip)
        if not path.is_file():
            raise MediaError(f"{path}: clip {clip} listed as ok in {manifest} but the file is missing")
        cuts = clip_cuts(path, detector=detector, threshold=threshold, min_scene_len=min_scene_len)
        rows.append({"clip_id": clip, "cuts": format_cuts(cuts)})
    df = pd.DataFrame(rows, columns=COLUMNS)
    write_tsv(out, df)
    return df


