"""Tracks out: per kept clip a MOTChallenge text file and a CVAT for video 1.1 XML.

Both are written from the final tracks of a unit (``corrected/{unit}.csv``: the tracker's
boxes with the CVAT corrections applied), one file per kept clip, also for a clip without
any recorded person (so a missed person can be added in CVAT):

* ``mot/{unit}/{clip}.txt``: ``frame,id,left,top,width,height,conf,-1,-1,-1`` per box,
  frames 1-based, sorted by frame and id (MOTChallenge's result format; pixels, 2 decimals).
* ``cvat/{unit}/{clip}.xml``: see :mod:`microg4m.formats.cvat`; upload it into a CVAT task made
  from ``clips/{unit}/{clip}.mp4`` (docs/cvat.md; ``microg4m where CLIP`` names them).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from microg4m.formats import cvat
from microg4m.common.atomic import write_text
from microg4m.formats.clips import kept_clips
from microg4m.formats.decisions import read_decisions
from microg4m.formats.manifest import read_manifest
from microg4m.common.progress import progress
from microg4m.formats.tracks import mot_text, read_tracks

def _fresh_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def run(manifest, decisions, tracks, mot_dir, cvat_dir) -> int:
    """Write both files for every kept clip of one unit; return the number of clips."""
    clips = kept_clips(read_manifest(manifest), read_decisions(decisions))
    t = read_tracks(tracks)
    mot_dir, cvat_dir = Path(mot_dir), Path(cvat_dir)
    _fresh_dir(mot_dir)
    _fresh_dir(cvat_dir)
    by_clip = dict(tuple(t.groupby("video_id")))
    for clip in progress(clips.index, "track files", total=len(clips)):
        rows = by_clip.get(clip, t.iloc[0:0])
        write_text(mot_dir / f"{clip}.txt", mot_text(rows))
        c = clips.loc[clip]
        cvat.write_clip(
            cvat_dir / f"{clip}.xml",
            clip,
            rows[["frame_id", "person_id", "xmin", "ymin", "xmax", "ymax"]].itertuples(index=False, name=None),
            frames=int(c["frames"]),
            width=int(c["width"]),
            height=int(c["height"]),
        )
    return len(clips)
