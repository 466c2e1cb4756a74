"""The unit plan of a run: ``results/units.tsv``, which sources each per-unit job takes.

One row per source, in the plan's order: ``unit, source_id, frames``. The workflow
writes it from the plan it runs (``sources_per_job``), so that whoever reads the results
folder afterwards (annotate, team mode, captions, CVAT, the CLI, the release) knows which
per-unit files are current: a folder of a unit that is not in the plan is a leftover of an
earlier plan, never a clip's home. ``frames``: the frames detect runs on that the source
was planned with under ``sources_per_job: auto`` (empty when its length was not known
then, or under an integer); the next run starts from this plan (``for_run``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Mapping

import pandas as pd

from microg4m.common import units as _units
from microg4m.common.atomic import write_tsv

COLUMNS = ["unit", "source_id", "frames"]
REQUIRED = COLUMNS[:2]  # (a plan written before the frames column reads too)
FILE = "units.tsv"
VIDEOS = "download/videos"  # (the download stage's folder, in the results)

log = logging.getLogger(__name__)


def write_plan(path: str | os.PathLike, units: dict[str, list[str]],
               frames: Mapping[str, int | None] | None = None) -> None:
    """Write ``unit -> [source ids]`` (atomically; the order of ``units`` and of each list
    kept), with each source's ``frames`` (None or missing: an empty cell)."""
    frames = frames or {}
    rows = [(unit, sid, "" if frames.get(sid) is None else str(int(frames[sid])))
            for unit, sids in units.items() for sid in sids]
    write_tsv(path, pd.DataFrame(rows, columns=COLUMNS))


def _read(path: str | os.PathLike) -> pd.DataFrame:
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not a unit plan (no column {', '.join(missing)})")
    twice = df.loc[df["source_id"].duplicated(), "source_id"].tolist()
    if twice:
        raise ValueError(f"{path}: source(s) in more than one unit: {', '.join(sorted(set(twice)))}")
    if "frames" not in df.columns:
        df["frames"] = ""
    bad = df.loc[~df["frames"].str.fullmatch(r"\d*"), "source_id"].tolist()
    if bad:
        raise ValueError(f"{path}: frames not a whole number for source(s) {', '.join(bad)}")
    return df


def read_plan(path: str | os.PathLike) -> dict[str, list[str]]:
    """``unit -> [source ids]`` in file order. A file without the columns unit and
    source_id, a source in two units, or frames that are not a whole number, is refused
    with a ValueError naming the file and the reason."""
    plan: dict[str, list[str]] = {}
    df = _read(path)
    for unit, sid in zip(df["unit"], df["source_id"]):
        plan.setdefault(unit, []).append(sid)
    return plan


def read_frames(path: str | os.PathLike) -> dict[str, int | None]:
    """``source_id -> frames`` the plan was made with (None: not known then)."""
    df = _read(path)
    return {sid: int(f) if f else None for sid, f in zip(df["source_id"], df["frames"])}


def source_frames(source_id: str, url: str, results: str | os.PathLike, *, downloads: bool = True) -> int | None:
    """The frames detect will run on for a source, as far as is known now: a local file's
    container length; else (``downloads``) the length its download record gives once it is
    downloaded; else None."""
    from microg4m.formats.records import read_saved  # (for the workflow only: readers of the plan stay light)
    from microg4m.formats.sources import normalize_url

    _, local = normalize_url(url)
    if local is not None:
        if not local.is_file():
            return None
        from microg4m.common.media import container_duration  # (cv2: only when a file is measured)

        return _units.clip_frames(container_duration(local))
    if downloads:
        saved = read_saved(Path(results) / VIDEOS, source_id)
        if saved is not None and saved["record"].get("status") == "ok":
            return _units.clip_frames(saved["record"].get("duration"))
    return None


def for_run(sources: pd.DataFrame, setting, slots: int, results: str | os.PathLike, *,
            downloads: bool = True) -> tuple[dict[str, list[str]], dict[str, int | None], dict[str, int] | None]:
    """The units of a run of ``sources`` (the table, indexed by source_id, with ``url``):
    ``(plan, frames to write, estimated frames of every source or None)``.

    Under ``sources_per_job: auto`` (units of several sources) the plan starts from the
    last one (``results/units.tsv``; one that cannot be read is reported and planned
    anew): its sources keep the frames they were planned with, the others are measured
    now (source_frames; ``downloads=False`` on a cluster, where the compute node must
    plan what the submitting Snakemake planned before any download). A source planned
    without a length counts with its download's length when that is known now (not
    written back: the plan and its file stay as they are), else as the median.
    Under an integer, or one source per unit, consecutive batches, no length measured.
    """
    ids = list(sources.index)
    path = Path(results) / FILE
    previous: dict[str, list[str]] = {}
    stored: dict[str, int | None] = {}
    if path.is_file():
        try:
            previous, stored = read_plan(path), read_frames(path)
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            log.warning("%s cannot be read (%s); the units are planned anew", path, exc)
            previous, stored = {}, {}
    if setting != "auto" or _units.per_job(setting, len(ids), slots) == 1:
        return _units.plan(ids, setting, slots), {}, None
    now = {}
    for sid in ids:
        if stored.get(sid) is None:
            now[sid] = source_frames(sid, sources.loc[sid, "url"], results, downloads=downloads)
    written = {sid: stored[sid] if sid in stored else now[sid] for sid in ids}
    known = {sid: written[sid] if written[sid] is not None else now.get(sid) for sid in ids}
    plan = _units.plan(ids, setting, slots, frames=known, previous=previous)
    return plan, written, _units.estimate(ids, known)
