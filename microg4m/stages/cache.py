"""Cache stage: the folders whose files outlive the jobs that write them.

Downloaded videos (``download/videos``), the frame cache of detect (``cache/detect``),
the exported models (``cache/models``), the near-duplicate cache (``cache/duplicates``)
and TransNetV2's predictions (``cache/scenes``): each a ``directory()`` output of the
``cache`` rule, made once (empty) and never re-made, since the rule has no input and no
params; the jobs that keep files there (download, detector and detect, duplicates, and
scenes with TransNetV2) read it as an ``ancient`` input,
so its contents are never a reason to run them, and Snakemake never deletes it before
one of them runs. Declared, the folders are removed by ``snakemake --delete-all-output``
(and emptied by ``--forceall``, which re-downloads every source).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

FOLDERS = {
    "download/videos": "the downloaded videos and their records",
    "cache/detect": "the boxes of every frame YOLO ran on",
    "cache/models": "the detector exported for each runtime",
    "cache/duplicates": "the near-duplicate stage's signatures index",
    "cache/scenes": "TransNetV2's predictions per clip (scenes.detector transnetv2 or both)",
}


def run(folder: str | os.PathLike) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    logging.getLogger(__name__).info("cache folder %s", folder)
