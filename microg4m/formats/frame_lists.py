"""Frame files and frame lists: ``frames/<clip>/<clip>_NNNNNN.jpg`` and the lists of
``frame_lists/{split}.csv`` (written by the frames and export stages, read by the VQA drafts)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from microg4m.common.atomic import write_text


FRAME_TMPL = "{clip}_{n:06d}.jpg"


FRAME_LIST_HEADER = "original_video_id video_id frame_id path labels"


def frame_path(clip: str, n: int) -> str:
    """Frame ``n`` (1-based) of ``clip``, relative to the frames folder."""
    return f"{clip}/{FRAME_TMPL.format(clip=clip, n=n)}"


def write_frame_lists(
    out_dir: str | os.PathLike, split_clips: Mapping[str, list[str]], frames: Mapping[str, int]
) -> None:
    """``<out_dir>/{split}.csv`` for each split; ``frames``: clip -> frame count."""
    for split, clips in split_clips.items():
        lines = [FRAME_LIST_HEADER]
        for clip in clips:
            lines += [f'{clip} {clip} {n} {frame_path(clip, n)} ""' for n in range(1, int(frames[clip]) + 1)]
        write_text(Path(out_dir) / f"{split}.csv", "\n".join(lines) + "\n")
