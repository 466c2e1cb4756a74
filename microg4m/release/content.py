"""What a release holds: its clips and their splits, its tables, its sources and which of
them come with video files, and what changed since the previous release.

The clips are the export's dataset (its splits: with action labels, the labelled clips)
less the withdrawn sources; each clip's files and boxes come from the results index. The
splits: a first release takes the export's; a later one keeps the previous release's for
every clip it had, and assigns the clips new since then around them with the export's
own recipe and settings (:func:`microg4m.formats.splits.assign` with ``fixed``), still
grouped by source and near-duplicate component when ``export.split`` groups so.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from microg4m.formats import labels, provenance, split_duplicates, splits
from microg4m.formats.ava import read_boxes, read_labels
from microg4m.formats.clips_table import SCORES, read_clips_table
from microg4m.formats.results_index import Clip, ResultsIndex
from microg4m.release import licences as licence_rules
from microg4m.release.history import Previous
from microg4m.release.tables import TABLES, frame

log = logging.getLogger(__name__)
CLIP_SECONDS = 3
FPS = 30


@dataclass
class ExportData:
    """The export, read back (stages/export.py writes it)."""

    folder: Path
    assignment: dict[str, str]  # its splits: clip -> split
    ava: pd.DataFrame | None  # the labelled rows (None: no labels)
    keyframes: pd.DataFrame  # boxes.csv
    sources: pd.DataFrame  # sources.csv
    label_map: pd.DataFrame
    scores: dict[str, dict] = field(default_factory=dict)  # clips.csv: clip -> its quality scores


def read_export(folder: str | os.PathLike) -> ExportData:
    folder = Path(folder)
    ava_path = folder / "ava_format_with_header.csv"
    sources = folder / "sources.csv"
    if not sources.is_file():
        raise ValueError(f"{sources}: not written; the export had no download tables (run the workflow's export)")
    clips_csv = folder / "clips.csv"  # absent in an export made before the quality scores
    scores = (read_clips_table(clips_csv).set_index("clip_id")[SCORES].to_dict("index")
              if clips_csv.is_file() else {})
    return ExportData(folder, splits.read_split_ids(folder / "splits"),
                      read_labels(ava_path) if ava_path.is_file() else None, read_boxes(folder / "boxes.csv"),
                      provenance.read_sources_csv(sources), labels.read_label_map(folder / "label_map.pbtxt"),
                      scores)


@dataclass
class Content:
    version: str
    assignment: dict[str, str]  # released clip -> split
    clips: dict[str, Clip]  # released clip -> its clip in the results index
    tables: dict[str, pd.DataFrame]  # table -> rows; per-split tables with a column split
    sources: pd.DataFrame  # released sources: provenance + license, license_from, videos
    added: dict[str, str]  # released clip -> the version that first released it
    withdrawn: dict[str, dict]  # source -> {date, reason, clips: {split: n}}: withdrawn sources whose clips
    #   this release leaves out (of the previous release, else of the export)
    removed: dict[str, str]  # clip of the previous release no longer in the export -> its split then
    notes: list[str] = field(default_factory=list)  # warnings for the log and CHANGES.md


def _scores(row: dict | None) -> dict:
    """A clip's quality scores for the clips table: None (null) for those it lacks, an empty camera."""
    row = row or {}
    out = {k: (None if pd.isna(v) else v) for k, v in ((k, row.get(k)) for k in SCORES)}
    out["camera"] = out["camera"] or ""
    return out


def _groups(clips: dict[str, Clip], split: dict, pairs_path, notes: list[str]) -> dict[str, str] | None:
    """Clip -> split unit, as the export makes them (export.split.group_by, .duplicates)."""
    if split.get("group_by", "clip") != "source":
        return None
    groups = {c: clip.source_id for c, clip in clips.items()}
    if pairs_path is not None and split.get("duplicates", "group") == "group":
        try:
            pairs = split_duplicates.load(pairs_path, set(clips))
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            notes.append(f"{pairs_path}: unreadable duplicates table ({exc}); new clips grouped by source only")
        else:
            groups = split_duplicates.linked_groups(pairs, groups)
    return groups


def build(*, index: ResultsIndex, export: ExportData, captions: list[dict] | None, previous: Previous | None,
          withdrawn: dict[str, dict], by_hand: dict[str, str], duplicate_pairs=None, split: dict | None = None,
          videos="auto", redistributable=(), version: str = "1.0.0") -> Content:
    split = split or {}
    notes: list[str] = []
    clips: dict[str, Clip] = {}
    for cid in sorted(export.assignment):
        clip = index.get(cid)
        if clip is None or not clip.kept:
            why = "no clip of the results folder" if clip is None else "not a kept clip of the results folder"
            notes.append(f"{cid}: in the export's splits but {why} (an export older than the results?); left out")
            continue
        if clip.source_id in withdrawn:
            continue
        clips[cid] = clip
    leaving = [c for c in export.assignment if c not in clips]
    old = previous.assignment if previous is not None else {}

    acts: dict[str, set[int]] = {c: set() for c in clips}
    if export.ava is not None:
        for cid, aid in zip(export.ava["video_id"], export.ava["action_id"]):
            if cid in acts:
                acts[cid].add(int(aid))
    fixed = old if previous is not None else {c: export.assignment[c] for c in clips}
    groups = _groups(clips, split, duplicate_pairs, notes)
    assignment = splits.assign(acts, groups=groups, seed=split.get("seed", 42),
                               ratios=split.get("ratios", (0.7, 0.1, 0.2)), fixed=fixed)
    group_of = groups or {c: c for c in clips}
    for g, held in splits.held_groups({c: s for c, s in fixed.items() if c in clips}, group_of).items():
        if len(held) > 1:
            notes.append(f"clips linked as one split unit ({g}) are in {len(held)} splits since an earlier release "
                         f"({'; '.join(f'{s}: {len(c)}' for s, c in held.items())}); kept there: a release never "
                         "moves a clip")

    # what leaves: withdrawn sources (counted by the split they were in) and clips gone from the export
    source_of: dict[str, str] = {}
    if previous is not None:
        source_of.update(zip(previous.splits["video_id"], previous.splits["source_id"]))
    for c in export.assignment:
        if (clip := index.get(c)) is not None:
            source_of.setdefault(c, clip.source_id)
    before = old if previous is not None else export.assignment
    gone_withdrawn: dict[str, dict] = {}
    for sid, w in sorted(withdrawn.items()):
        had = Counter(s for c, s in before.items() if source_of.get(c) == sid)
        if had:  # a source withdrawn from an earlier release has no clips to leave any more
            gone_withdrawn[sid] = dict(w, clips={s: had[s] for s in splits.SPLITS if had[s]})
        else:
            log.info("release: withdrawn source %s has no clip in %s", sid,
                     "the previous release" if previous is not None else "the export")
    removed = {c: s for c, s in old.items() if c not in clips and source_of.get(c) not in withdrawn}
    if leaving:
        log.info("release: %d clip(s) of the export left out (withdrawn or not in the results)", len(leaving))

    # sources and which come with video files
    src = export.sources[export.sources["source_id"].isin({c.source_id for c in clips.values()})].copy()
    decided = licence_rules.decide(src, mode=videos, patterns=redistributable, by_hand=by_hand)
    src = src.drop(columns=["license"]).merge(decided, on="source_id", how="left")
    counts = Counter(c.source_id for c in clips.values())
    src["clips"] = src["source_id"].map(counts).fillna(0).astype(int)
    missing_src = sorted({c.source_id for c in clips.values()} - set(src["source_id"]))
    for sid in missing_src:
        notes.append(f"{sid}: clips in the export but no row in its sources.csv; its clips go without video")
    with_video = dict(zip(src["source_id"], src["videos"]))

    tables = {}
    url_of, licence_of = dict(zip(src["source_id"], src["url"])), dict(zip(src["source_id"], src["license"]))
    cl = []
    unscored = sorted(c for c in clips if c not in export.scores)
    if unscored:
        notes.append(f"{len(unscored)} clip(s) without quality scores in the export's clips.csv (e.g. {unscored[0]}): "
                     "their score columns are empty")
    for cid, clip in clips.items():
        s = assignment[cid]
        video = f"videos/{s}/{cid}.mp4" if with_video.get(clip.source_id, False) else ""
        cl.append({"video_id": cid, "source_id": clip.source_id, "clip_type": clip.clip_type,
                   "start_s": clip.seq * CLIP_SECONDS, "end_s": clip.seq * CLIP_SECONDS + CLIP_SECONDS,
                   "frames": clip.frames, "width": clip.width, "height": clip.height,
                   "license": licence_of.get(clip.source_id, licence_rules.NOT_REPORTED),
                   "source_url": url_of.get(clip.source_id, ""), "video": video, "faces_blurred": False, "split": s,
                   **_scores(export.scores.get(cid))})
    tables["clips"] = pd.DataFrame(cl, columns=[*TABLES["clips"].names, "split"])

    if export.ava is not None:
        ava = export.ava[export.ava["video_id"].isin(clips)].copy()
        ava["split"] = ava["video_id"].map(assignment)
        tables["actions"] = ava.reset_index(drop=True)
    tr = []
    for cid in clips:
        for f, boxes in sorted(index.boxes(cid).items()):
            for p, x1, y1, x2, y2 in sorted(boxes):
                tr.append((cid, f, p, x1, y1, x2, y2, assignment[cid]))
    tables["tracks"] = pd.DataFrame(tr, columns=[*TABLES["tracks"].names, "split"])
    if captions is not None:
        cap, qa, outside = [], [], 0
        for r in captions:
            if r["video_id"] not in clips:
                owner = source_of.get(r["video_id"]) or getattr(index.get(r["video_id"]), "source_id", None)
                outside += owner not in withdrawn
                continue
            s = assignment[r["video_id"]]
            cap.append((r["video_id"], r["caption"], s))
            qa += [(r["video_id"], i, p["Q"], p["A"], s) for i, p in enumerate(r["qa_pairs"], 1)]
        if outside:
            notes.append(f"{outside} reviewed caption(s) of clips outside the export's splits left out")
        tables["captions"] = pd.DataFrame(cap, columns=[*TABLES["captions"].names, "split"])
        tables["vqa"] = pd.DataFrame(qa, columns=[*TABLES["vqa"].names, "split"])
    tables["sources"] = frame(TABLES["sources"], src.assign(videos=src["videos"].astype(bool)))
    tables["labels"] = frame(TABLES["labels"], export.label_map)

    added = {c: (previous.added.get(c) if previous is not None and c in old else None) or version for c in clips}
    moved = [c for c in clips if c in old and old[c] != assignment[c]]
    if moved:  # assign() never moves a fixed clip; a failure here is a bug, not bad input
        raise AssertionError(f"release: clips of the previous release changed split: {moved[:5]}")
    return Content(version, assignment, clips, tables, src, added, gone_withdrawn, removed, notes)
