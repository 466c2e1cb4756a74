"""The VLM baseline's answers file, ``results/har_vlm/{unit}.json`` (written by rule
``har_vlm``, :func:`microg4m.evaluate.vlm_har.run`; its layout is documented there and in
docs/formats.md): the one reader, shared by the scoring (Table 11) and the labelling
page's suggestions. Here, not in microg4m.evaluate, so that the page does not import the
model client."""

from __future__ import annotations

import json
from pathlib import Path

from microg4m.common import faults


def read_answers(paths) -> dict[tuple[str, int], dict]:
    """(clip, person) -> answer record, over answer files of any units; ValueError naming a
    file that is no answers file."""
    out = {}
    for path in paths:
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
            persons = doc["persons"]
            for r in persons:
                out[(r["video_id"], int(r["person_id"]))] = r
        except (OSError, ValueError, KeyError, TypeError) as exc:
            faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
            raise ValueError(f"{path}: not a VLM answers file ({type(exc).__name__}: {exc})") from None
    return out
