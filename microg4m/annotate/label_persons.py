"""What the labelling tools' files are made of: the kept clips of a run (through the results
index), each clip's persons with their boxes and AVA keyframe, and the actions of an actions
file per person.

The AVA keyframe is the export's own (``microg4m.stages.export.keyframes``: the recorded
frame closest to the median of the person's recorded frames), so the frame a tool shows as
the keyframe is the frame the AVA rows carry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from microg4m.formats.clips import Report
from microg4m.formats.labels import ACTIONS_COLUMNS, LabelError, read_actions
from microg4m.formats.results_index import Clip, ResultsIndex
from microg4m.stages.export import keyframes


@dataclass(frozen=True)
class Person:
    person_id: int
    frames: np.ndarray  # 1-based frames with a box, ascending
    boxes: np.ndarray  # (n, 4) x1, y1, x2, y2 in pixels
    keyframe: int  # the AVA keyframe (a frame of ``frames``)


def keyframe_of(clip: Clip, frames) -> int:
    """The AVA keyframe of a person of ``clip`` with boxes on ``frames`` (1-based): the export's rule."""
    df = pd.DataFrame({"video_id": clip.clip_id, "frame_id": np.asarray(frames, int), "person_id": 1, "xmin": 0.0,
                       "ymin": 0.0, "xmax": float(clip.width), "ymax": float(clip.height)})
    sizes = pd.DataFrame({"width": [clip.width], "height": [clip.height]}, index=[clip.clip_id])
    return int(keyframes(df, sizes, Report())["frame_stamp"].iloc[0])


def persons(index: ResultsIndex, clip: Clip) -> list[Person]:
    """The clip's persons (its unit's final tracks), in id order, with their AVA keyframes."""
    rows = index.track_rows(clip.clip_id)
    out = []
    for pid in np.unique(rows[:, 1]).astype(int):
        mine = rows[rows[:, 1] == pid]
        mine = mine[np.argsort(mine[:, 0], kind="stable")]
        frames = mine[:, 0].astype(int)
        out.append(Person(int(pid), frames, mine[:, 2:6].astype(float), keyframe_of(clip, frames)))
    return out


def kept_clips(index: ResultsIndex) -> dict[str, list[Clip]]:
    """unit -> its kept clips (trimmed and kept by the filter), in clip-id order."""
    out: dict[str, list[Clip]] = {}
    for clip in index.clips().values():
        if clip.kept:
            out.setdefault(clip.unit, []).append(clip)
    return out


def actions_of(path, label_ids: set[int]) -> tuple[dict[tuple[str, int], list[int]], list[str]]:
    """``(clip, person) -> [action ids]`` of an actions file (file order, no repeats), and its
    rows that cannot be used, each named with the line and the reason. No file: nothing."""
    if path is None or not Path(path).is_file():
        return {}, []
    try:
        df = read_actions(path)
    except LabelError as exc:
        raise ValueError(str(exc)) from None
    out: dict[tuple[str, int], list[int]] = {}
    problems = []
    for r in df.itertuples(index=False):
        if r.fields != len(ACTIONS_COLUMNS) or not r.person_id.isdigit() or not re.fullmatch(r"\d+", r.action):
            problems.append(f"{path}:{r.line}: row {r.raw!r} is not {','.join(ACTIONS_COLUMNS)} with integer "
                            "person and action; left out")
            continue
        if int(r.action) not in label_ids:
            problems.append(f"{path}:{r.line}: unknown action id {r.action} (not in the label map); left out")
            continue
        ids = out.setdefault((r.video_id, int(r.person_id)), [])
        if int(r.action) not in ids:
            ids.append(int(r.action))
    return out, problems
