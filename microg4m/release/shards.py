"""The release's WebDataset shards (``release.shards``): ``shards/<split>-NNNNNN.tar``, one
sample per clip in clip-id order, written with webdataset's own ``TarWriter``.

A sample is ``<clip>.json`` (the clip's record: source, split, licence, times, every
person's box on every recorded frame, the keyframe labels, the caption and the QA pairs)
and ``<clip>.mp4`` when the clip's video is in the release (the same bytes as
``videos/<split>/<clip>.mp4``). A shard closes at ``max_samples`` samples or before it
would pass ``max_size_mb``. Deterministic: fixed member order, owner, mode and time (0,
or ``SOURCE_DATE_EPOCH``), sorted JSON keys, so the same inputs give byte-identical shards.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from microg4m.common.atomic import atomic_path
from microg4m.formats.splits import SPLITS


def mtime() -> int:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    return int(epoch) if epoch.strip().isdigit() else 0


def sample_json(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def write(out_dir: str | os.PathLike, samples: dict[str, list[tuple[str, dict, Path | None]]], *,
          max_samples: int = 1000, max_size_mb: float = 1000) -> list[str]:
    """``samples``: split -> [(clip id, record, mp4 or None)] (any order); returns the shard
    paths relative to ``out_dir``."""
    from webdataset import TarWriter

    out = Path(out_dir)
    limit = max_size_mb * 1e6
    written = []
    for split in SPLITS:
        items = sorted(samples.get(split, []), key=lambda s: s[0])
        shard, start = 0, 0
        while start < len(items):
            size, end = 0, start
            while end < len(items) and end - start < max_samples:
                mp4 = items[end][2]
                add = len(sample_json(items[end][1])) + (mp4.stat().st_size if mp4 is not None else 0) + 2048
                if end > start and size + add > limit:
                    break
                size, end = size + add, end + 1
            rel = f"shards/{split}-{shard:06d}.tar"
            with atomic_path(out / rel, suffix=".tmp.tar") as tmp, open(tmp, "wb") as fh:
                with TarWriter(fh, user="", group="", mode=0o444, mtime=mtime()) as tar:
                    for clip, record, mp4 in items[start:end]:
                        sample = {"__key__": clip, "json": sample_json(record)}
                        if mp4 is not None:
                            sample["mp4"] = mp4.read_bytes()
                        tar.write(sample)
            written.append(rel)
            shard, start = shard + 1, end
    return written
