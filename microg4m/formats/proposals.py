"""mmaction2's person proposals: ``ava_{train,val,test}_dense_proposals.pkl`` in the export.

mmaction2's ``AVADataset`` reads, for each keyframe, the person boxes a detector found
there (``proposal_file``; AVA ships them as ``ava_dense_proposals_*.FAIR.*.pkl``): a
pickled dict keyed ``"<clip>,<stamp:04d>"`` (its ``img_key``) whose values are float32
arrays with one row ``[x1, y1, x2, y2, score]`` per person. Here the keys are the
keyframes of the split's annotation file (``ava_train.csv`` ...), and the rows are every
tracked person on that frame of the clip, ordered by person id: the tracker's box
(the detector's, not the ground truth; a corrected clip's are the corrected boxes),
normalised and rounded like the AVA files, and the tracker's confidence as the score
(1.0 for boxes a person drew in CVAT). Same inputs -> byte-identical files.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd

from microg4m.common.atomic import atomic_path

SPLITS = ("train", "val", "test")
BOX = ["xmin", "ymin", "xmax", "ymax"]


def path(out_dir, split: str) -> Path:
    return Path(out_dir) / f"ava_{split}_dense_proposals.pkl"


def img_key(clip: str, stamp: int) -> str:
    """mmaction2's key of a keyframe: ``f"{video_id},{timestamp:04d}"``."""
    return f"{clip},{int(stamp):04d}"


def build(tracks: pd.DataFrame, clips: pd.DataFrame, keys) -> dict[str, np.ndarray]:
    """Proposals for ``keys`` ((clip, stamp) pairs) from the track rows (pixels, with ``conf``).

    ``clips``: the export's clip table (``width``, ``height`` by clip id). A keyframe
    without any tracked person gets an empty (0, 5) array.
    """
    keys = sorted({(str(c), int(s)) for c, s in keys})
    wanted = pd.DataFrame(keys, columns=["video_id", "frame_id"])
    rows = tracks.merge(wanted, on=["video_id", "frame_id"]).sort_values(["video_id", "frame_id", "person_id"])
    by_key = {k: g for k, g in rows.groupby(["video_id", "frame_id"], sort=False)}
    out = {}
    for clip, stamp in keys:
        g = by_key.get((clip, stamp))
        if g is None:
            out[img_key(clip, stamp)] = np.zeros((0, 5), np.float32)
            continue
        w, h = float(clips.at[clip, "width"]), float(clips.at[clip, "height"])
        box = np.round(np.clip(g[BOX].to_numpy(float) / np.array([w, h, w, h]), 0.0, 1.0), 3)
        out[img_key(clip, stamp)] = np.column_stack([box, g["conf"].to_numpy(float)]).astype(np.float32)
    return out


def write(out_dir, tracks: pd.DataFrame, clips: pd.DataFrame, ava: pd.DataFrame | None, assignment: dict) -> None:
    """One pickle per split; none for an empty split (like its AVA files, see export) and
    none without labels."""
    for split in SPLITS:
        target = path(out_dir, split)
        rows = ava[ava["video_id"].map(assignment) == split] if ava is not None else ()
        if not len(rows):
            target.unlink(missing_ok=True)  # stale, from an earlier run
            continue
        props = build(tracks, clips, zip(rows["video_id"], rows["frame_stamp"]))
        with atomic_path(target) as tmp, open(tmp, "wb") as fh:
            pickle.dump(props, fh, protocol=4)
