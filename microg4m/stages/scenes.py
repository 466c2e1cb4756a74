"""Scenes stage: shot transitions inside each ok clip of one source.

``scenes.detector`` picks the detector: a PySceneDetect one (``content``, the paper's
rule and the default, ``adaptive``, ``threshold``, ``hash``, ``histogram``), which finds
hard cuts; ``transnetv2``, the shot-boundary network (microg4m.engines.transnet), which
also finds gradual transitions (dissolves, fades) and tells them apart, with the wipes it
misses found beside it (microg4m.common.wipes: an edge sweeping across the picture); or
``both``, the union of ``content``'s cuts and those. The table lists every
transition's frame and, apart, the gradual ones (microg4m.formats.scenes).

PySceneDetect's default ``min_scene_len`` is 15 frames, and it also counts from the
first frame of the video, so a cut in the first half second of a 3 s clip would be
hidden. The setting ``scenes.min_scene_len`` (1 by default) makes every cut count.

TransNetV2's probabilities per frame are kept per unit in a cache folder (``cache``,
results/cache/scenes in the workflow) under the clip file's sha256 and a key of the
package's and torch's versions, the inference windows, the runtime (OpenVINO on the CPU)
and on CUDA the GPU's model, so that a change of its threshold, of ``gradual_frames`` or of
the detector between ``transnetv2`` and ``both`` does not run the network again; the ONNX
export OpenVINO compiles is kept there too. The network runs where detect runs
(``detect.device``: the CPU, or a CUDA device).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd

from microg4m.common import wipes
from microg4m.common.progress import progress
from microg4m.formats import manifest as mf
from microg4m.common.atomic import atomic_path, write_tsv
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
NETWORK = ("transnetv2", "both")  # detectors that run TransNetV2 (both: with content's cuts)
CHOICES = (*DETECTORS, *NETWORK)


def check(detector: str = "content", threshold: float = 40.0, min_scene_len: int = 1,
          transnetv2_threshold: float = 0.5, gradual_frames: int = 3) -> None:
    """Raise ValueError naming the first bad setting."""
    if detector not in CHOICES:
        raise ValueError(f"scenes.detector = {detector!r}: expected one of {', '.join(CHOICES)}")
    if isinstance(min_scene_len, bool) or not isinstance(min_scene_len, int) or min_scene_len < 1:
        raise ValueError(f"scenes.min_scene_len = {min_scene_len!r}: expected an integer >= 1 (frames)")
    if isinstance(transnetv2_threshold, bool) or not isinstance(transnetv2_threshold, (int, float)) \
            or not 0 < transnetv2_threshold < 1:
        raise ValueError(f"scenes.transnetv2_threshold = {transnetv2_threshold!r}: expected a probability in (0, 1)")
    if isinstance(gradual_frames, bool) or not isinstance(gradual_frames, int) or gradual_frames < 2:
        raise ValueError(f"scenes.gradual_frames = {gradual_frames!r}: expected an integer >= 2 (frames)")


def make_detector(detector: str = "content", threshold: float = 40.0, min_scene_len: int = 1):
    """A fresh PySceneDetect detector (detectors keep state: one per clip); ``both``: content's."""
    import scenedetect

    check(detector, threshold, min_scene_len)
    if detector == "transnetv2":
        raise ValueError("scenes.detector = 'transnetv2' is not a PySceneDetect detector")
    cls_name, arg = DETECTORS["content" if detector == "both" else detector]
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


def clip_transitions(path: str | os.PathLike, *, detector: str = "content", threshold: float = 40.0,
                     min_scene_len: int = 1, transnetv2_threshold: float = 0.5, gradual_frames: int = 3,
                     predictions: tuple[np.ndarray, np.ndarray] | None = None,
                     device: str = "cpu") -> tuple[list[int], list[int]]:
    """``(cuts, gradual)`` of the video at ``path``: the 1-based frames at which a new shot
    starts (for a gradual transition, the frame after its middle), and those of them that
    are gradual transitions (see the module's docstring).

    ``predictions``: TransNetV2's ``(single, many)`` for the clip when already known; else
    the network runs on ``device`` (a torch device name: transnet.torch_device).
    """
    from microg4m.engines import transnet

    check(detector, threshold, min_scene_len, transnetv2_threshold, gradual_frames)
    if detector not in NETWORK:
        return clip_cuts(path, detector=detector, threshold=threshold, min_scene_len=min_scene_len), []
    if predictions is None:
        predictions = transnet.predict([transnet.read_small_frames(path)], device=device)[0]
    found = transnet.transitions(*predictions, threshold=transnetv2_threshold, gradual_frames=gradual_frames)
    found = with_wipes(found, wipes.find_wipes(wipes.small_gray(path)))
    if detector == "both":
        found = transnet.union(clip_cuts(path, detector="content", threshold=threshold,
                                         min_scene_len=min_scene_len), found)
    cuts = sorted({t.frame for t in found})
    return cuts, sorted({t.frame for t in found if t.gradual})


def with_wipes(found: list, found_wipes: list) -> list:
    """TransNetV2's transitions and the wipes (microg4m.common.wipes) that none of them
    already holds (frames overlapping, give or take 3), each a gradual transition whose new
    shot starts at the frame after its middle."""
    from microg4m.engines.transnet import Transition

    merged = list(found)
    for w in found_wipes:
        if not any(t.first - 3 <= w.last and w.first <= t.last + 3 for t in found):
            merged.append(Transition(frame=(w.first + w.last) // 2 + 1, first=w.first, last=w.last, gradual=True))
    return sorted(merged, key=lambda t: t.frame)


CACHE_FORMAT = 1  # bump when what a cache file holds changes


class PredictionCache:
    """TransNetV2's ``(single, many)`` per clip sha256, one ``.npz`` per unit under a key folder."""

    def __init__(self, folder: str | os.PathLike, device: str = "cpu", runtime: str = "torch"):
        import torch

        from microg4m.engines import transnet

        settings = dict(format=CACHE_FORMAT, package=transnet.PACKAGE, version=transnet.version(),
                        torch=torch.__version__,
                        window=transnet.WINDOW, step=transnet.STEP, pad=transnet.PAD,
                        size=[transnet.WIDTH, transnet.HEIGHT])
        if runtime == "openvino":  # its sums round differently (torch's key is as it was)
            import openvino

            settings["runtime"] = f"openvino {openvino.__version__}"
        if str(device).startswith("cuda"):  # so do a GPU's kernels
            from microg4m.engines import runtime as rt

            settings["hardware"] = rt.device_tag(device)
        text = json.dumps(settings, sort_keys=True)
        self.folder = Path(folder) / f"transnetv2-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
        self.settings = text

    def load(self, unit: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        try:
            with np.load(self.folder / f"{unit}.npz") as data:
                shas = {k[:-2] for k in data.files}
                return {sha: (data[f"{sha}_s"], data[f"{sha}_m"]) for sha in shas}
        except (OSError, KeyError, ValueError):
            return {}

    def save(self, unit: str, entries: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        key_file = self.folder / "key.json"
        if not key_file.is_file():
            with atomic_path(key_file, suffix=".json") as tmp:
                Path(tmp).write_text(self.settings + "\n")
        arrays = {}
        for sha, (single, many) in sorted(entries.items()):
            arrays[f"{sha}_s"] = np.asarray(single, np.float32)
            arrays[f"{sha}_m"] = np.asarray(many, np.float32)
        with atomic_path(self.folder / f"{unit}.npz", suffix=".npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)


def predictions_of(paths: dict[str, Path], cache: str | os.PathLike | None = None,
                   unit: str = "", device: str = "cpu", runtime: str | None = None,
                   threads: int | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """TransNetV2's predictions for each clip (clip id -> file), from ``cache`` where it
    has them; the clips it lacks are run (batched, on ``device``, a torch device name, with
    ``runtime``, None: transnet.runtime_for(device), and ``threads``) and kept there (only
    this unit's clips; the ONNX export OpenVINO compiles is kept in ``cache`` too)."""
    from microg4m.engines import runtime as rt
    from microg4m.engines import transnet

    runtime = runtime or transnet.runtime_for(device)
    store = PredictionCache(cache, device, runtime) if cache else None
    known = store.load(unit) if store else {}
    shas = {clip: rt.sha256(path) for clip, path in paths.items()} if store else {}
    out, todo = {}, []
    for clip in paths:
        if store and shas[clip] in known:
            out[clip] = known[shas[clip]]
        else:
            todo.append(clip)
    group = 8 if device == "cpu" else 32  # clips decoded, then run, together
    for i in range(0, len(todo), group):
        chunk = todo[i:i + group]
        frames = [transnet.read_small_frames(paths[c]) for c in chunk]
        for clip, pred in zip(chunk, transnet.predict(frames, device=device, runtime=runtime, threads=threads,
                                                      folder=cache)):
            out[clip] = pred
    if store and (todo or set(known) != set(shas.values())):
        store.save(unit, {shas[c]: out[c] for c in paths})
    logging.getLogger(__name__).info("TransNetV2 (%s) on %s: %d clips run, %d from the cache", runtime, device,
                                     len(todo), len(paths) - len(todo))
    return out


def run(manifest: str | os.PathLike, out: str | os.PathLike, *, detector: str = "content",
        threshold: float = 40.0, min_scene_len: int = 1, transnetv2_threshold: float = 0.5,
        gradual_frames: int = 3, cache: str | os.PathLike | None = None,
        threads: int | None = None, device: str = "cpu") -> pd.DataFrame:
    """Transitions of every ok clip of ``manifest``; writes ``out`` (TSV ``clip_id, cuts,
    gradual``) and returns it. ``cache``: TransNetV2's cache folder (none: not kept);
    ``threads``: TransNetV2's threads on the CPU (none: the runtime's default);
    ``device``: where TransNetV2 runs (``detect.device``: cpu, cuda, cuda:N or auto; CUDA
    asked for on a machine without it is an error naming the setting)."""
    settings = dict(detector=detector, threshold=threshold, min_scene_len=min_scene_len,
                    transnetv2_threshold=transnetv2_threshold, gradual_frames=gradual_frames)
    check(**settings)  # bad settings fail before any decoding
    paths = {}
    for clip in mf.ok_clips(manifest)["clip_id"]:
        path = mf.clip_file(manifest, clip)
        if not path.is_file():
            raise MediaError(f"{path}: clip {clip} listed as ok in {manifest} but the file is missing")
        paths[clip] = path
    preds = {}
    if detector in NETWORK:
        from microg4m.engines import transnet
        from microg4m.engines.model import passive_openmp

        passive_openmp()  # before torch loads
        dev = transnet.torch_device(device)  # a bad device fails before any decoding
        if threads:
            import torch

            torch.set_num_threads(int(threads))
        preds = predictions_of(paths, cache, unit=Path(manifest).parent.name, device=dev,  # clips/{unit}/manifest.tsv
                               threads=threads)
    rows = []
    for clip in progress(list(paths), "scenes"):
        cuts, gradual = clip_transitions(paths[clip], predictions=preds.get(clip), **settings)
        rows.append({"clip_id": clip, "cuts": format_cuts(cuts), "gradual": format_cuts(gradual)})
    df = pd.DataFrame(rows, columns=COLUMNS)
    write_tsv(out, df)
    return df
