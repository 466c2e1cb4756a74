"""AVA-format export: keyframe boxes, label validation, merged CSVs, splits, frame lists
and statistics (the files of the released MicroG-4M dataset; see docs/formats.md).

Keyframe: per (clip, person) the recorded frame closest to the median of that person's
recorded frames (ties: the earliest). Its box is divided by the clip's width/height
from the manifest, clamped to [0, 1], rounded to 3 decimals (numpy, like the
reference's pandas ``round``) and written as Python writes the float (``0.99``,
``0.985``, ``1.0``), as in the released files. The frame stamp is the 1-based frame
number in the clip, unpadded.

Inputs that cannot be used (an unreadable file, a track row of a clip that is not
kept, a degenerate box ...) are listed in ``input_report.tsv`` and the rest goes on.
Label rows with a problem are listed in ``label_report.tsv`` and left out of the AVA
files; exact duplicate rows are removed and listed there too.

A split that gets no clip although its ratio is above 0 (a small dataset) is reported in
both reports and the log, and its AVA files are not written (see ``empty_splits``).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from microg4m.common import faults
from microg4m.report import datasheet, stats
from microg4m.formats import labels, proposals, split_duplicates, splits
from microg4m.common.atomic import atomic_path, write_text, write_tsv
from microg4m.formats.clips import Report, load_clips
from microg4m.formats.clips_table import COLUMNS as CLIPS_COLUMNS
from microg4m.formats.clips_table import SCORES
from microg4m.formats.ava import SPLIT_FILES
from microg4m.formats.labels import MAX_ACTIONS
from microg4m.formats.frame_lists import write_frame_lists
from microg4m.formats.quality import read_quality
from microg4m.formats.tracks import BOX, read_tracks
from microg4m.formats.tracks import COLUMNS as TRACK_COLUMNS

AVA_HEADER = "video_id,frame_stamp,xmin,ymin,xmax,ymax,action_id,person_id"
BOXES_HEADER = "video_id,frame_stamp,xmin,ymin,xmax,ymax,person_id"
LABEL_OUTPUTS = [
    "ava_format_with_header.csv",
    "ava_format.csv",
    *SPLIT_FILES.values(),
    "ava_val_predicted_boxes.csv",
    "ava_test_predicted_boxes.csv",
    "label_report.tsv",
]
def fmt(v: float) -> str:
    """A rounded coordinate as the released files write it (``0.99``, ``1.0``)."""
    return repr(float(v))


# ---------------------------------------------------------------- inputs


def load_tracks(tracks, clips: pd.DataFrame, report: Report) -> pd.DataFrame:
    """Track rows of kept clips, numeric and checked; problems go to the report."""
    parts = []
    for path in sorted(map(str, tracks)):
        try:
            df = read_tracks(path, on_problem=lambda message, path=path: report.add(path, "", message))
        except ValueError as exc:
            report.add(path, "", str(exc).removeprefix(f"{path}: "))
            continue
        for clip, n in df.groupby("video_id").size().items():
            if clip not in clips.index:
                report.add(path, clip, f"{n} track row(s) of a clip in no manifest; ignored")
            elif not clips.at[clip, "kept"]:
                report.add(
                    path, clip, f"{n} track row(s) of a clip that is not kept ({clips.at[clip, 'why']}); ignored"
                )
        df = df[df["video_id"].isin(clips.index[clips["kept"]])]
        over = df["frame_id"] > df["video_id"].map(clips["frames"])
        for clip, n in df[over].groupby("video_id").size().items():
            report.add(path, clip, f"{n} track row(s) beyond the clip's last frame; ignored")
        parts.append(df[~over])
    cols = {c: (str if c == "video_id" else int if c in ("frame_id", "person_id") else float) for c in TRACK_COLUMNS}
    empty = pd.DataFrame(columns=TRACK_COLUMNS).astype(cols)
    t = pd.concat(parts, ignore_index=True) if parts else empty
    dup = t.duplicated(["video_id", "person_id", "frame_id"])
    for (clip, pid), n in t[dup].groupby(["video_id", "person_id"]).size().items():
        report.add("tracks", clip, f"person {pid}: {n} repeated frame row(s); first kept")
    return t[~dup]


def keyframes(tracks: pd.DataFrame, clips: pd.DataFrame, report: Report) -> pd.DataFrame:
    """One normalised box per (clip, person) at the keyframe; sorted by clip, person."""
    rows = []
    t = tracks.sort_values(["video_id", "person_id", "frame_id"], kind="stable")
    for (clip, pid), g in t.groupby(["video_id", "person_id"], sort=True):
        f = g["frame_id"].to_numpy()
        i = int(np.argmin(np.abs(f - np.median(f))))  # first minimum = earliest frame
        w, h = clips.at[clip, "width"], clips.at[clip, "height"]
        raw = g.iloc[i][BOX].to_numpy(dtype=float) / np.array([w, h, w, h], dtype=float)
        box = np.round(np.clip(raw, 0.0, 1.0), 3)
        if not (box[0] < box[2] and box[1] < box[3]):
            report.add(
                "tracks", clip, f"person {pid}: empty box at keyframe {int(f[i])} after normalising; no keyframe"
            )
            continue
        rows.append((clip, int(f[i]), *box.tolist(), int(pid)))
    return pd.DataFrame(rows, columns=["video_id", "frame_stamp", *BOX, "person_id"])


# ---------------------------------------------------------------- labels


def _row_problems(
    r, clips: pd.DataFrame, have_box: set, label_ids: set[int]
) -> tuple[list[str], int | None, int | None]:
    """Problems of one well-formed label row, and its person and action ids when they parse."""
    probs = []
    known = r.video_id in clips.index
    kept = known and clips.at[r.video_id, "kept"]
    if not known:
        probs.append(f"unknown clip {r.video_id!r} (in no manifest)")
    elif not kept:
        probs.append(f"clip not kept ({clips.at[r.video_id, 'why']})")
    if r.movie_or_real not in ("m", "r"):
        probs.append(f"movie_or_real must be m or r, got {r.movie_or_real!r}")
    elif known and r.movie_or_real != clips.at[r.video_id, "clip_type"]:
        probs.append(f"movie_or_real {r.movie_or_real!r} but the clip type is {clips.at[r.video_id, 'clip_type']!r}")
    pid = int(r.person_id) if r.person_id.isdigit() and int(r.person_id) > 0 else None
    if pid is None:
        probs.append(f"person_id {r.person_id!r} is not a positive integer")
    aid = int(r.action) if re.fullmatch(r"-?\d+", r.action) else None
    if aid is None:
        probs.append(f"action {r.action!r} is not an integer")
    elif aid not in label_ids:
        probs.append(f"unknown action id {aid} (not in the label map)")
    if kept and pid is not None and (r.video_id, pid) not in have_box:
        probs.append(f"person {pid} has no box in {r.video_id}")
    return probs, pid, aid


def validate_labels(actions: pd.DataFrame, clips: pd.DataFrame, boxes: pd.DataFrame, label_ids: set[int]):
    """Check the label rows. Returns (valid rows, report DataFrame ``line,row,problem``, duplicates).

    Valid rows have ``line, video_id, person_id, action_id``. Each problem row is reported
    once (all its problems joined by ``; ``); later exact duplicates are removed and
    reported; a person with more than MAX_ACTIONS actions has all its rows reported.
    """
    have_box = set(zip(boxes["video_id"], boxes["person_id"]))
    seen: dict[tuple, int] = {}
    valid, report, dups = [], [], 0
    n_cols = len(labels.ACTIONS_COLUMNS)
    for r in actions.itertuples(index=False):
        key = (r.video_id, r.movie_or_real, r.person_id, r.action, r.fields)
        if key in seen:
            report.append((r.line, r.raw, f"exact duplicate of line {seen[key]}; removed"))
            dups += 1
            continue
        seen[key] = r.line
        if r.fields != n_cols:
            report.append((r.line, r.raw, f"{r.fields} fields, expected {n_cols}"))
            continue
        probs, pid, aid = _row_problems(r, clips, have_box, label_ids)
        if probs:
            report.append((r.line, r.raw, "; ".join(probs)))
        else:
            valid.append((r.line, r.raw, r.video_id, pid, aid))
    v = pd.DataFrame(valid, columns=["line", "raw", "video_id", "person_id", "action_id"])
    v = v.astype({"line": int, "video_id": str, "person_id": int, "action_id": int})
    v["n"] = v.groupby(["video_id", "person_id"])["action_id"].transform("size")
    for r in v[v["n"] > MAX_ACTIONS].itertuples(index=False):
        report.append(
            (
                r.line,
                r.raw,
                f"person {r.person_id} in {r.video_id} has {r.n} actions (more than {MAX_ACTIONS}); all left out",
            )
        )
    v = v.loc[v["n"] <= MAX_ACTIONS, ["line", "video_id", "person_id", "action_id"]]
    rep = pd.DataFrame(sorted(report), columns=["line", "row", "problem"])
    return v.reset_index(drop=True), rep, dups


# ---------------------------------------------------------------- writers


def _frames(done_lists, assignment, out: Path, report: Report) -> int:
    """Link the frame folder of every clip of the dataset into ``out/frames/<clip>`` (relative
    links to where the frames job wrote it, ``frames/{unit}/<clip>``): the one frame root
    that PySlowFast's frame lists and mmaction2's ``data_root`` read, holding exactly this
    export's clips. Clips of the dataset without frames are reported. Returns the links."""
    root = out / "frames"
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():  # the links of an earlier export into this folder (the CLI's)
        if old.is_symlink():
            old.unlink()
    linked = 0
    for path in sorted(map(str, done_lists)):
        try:
            done = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
            ours = done[done["clip_id"].isin(assignment)]
            bad = ours[ours["status"] != "ok"]
            good = ours[ours["status"] == "ok"]
            where = good["path"] if "path" in good.columns else good["clip_id"]  # older lists: beside them
        except (OSError, KeyError, ValueError) as exc:
            faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
            report.add(path, "", f"unreadable frames done list ({type(exc).__name__}: {exc})")
            continue
        for r in bad.itertuples(index=False):
            report.add(path, r.clip_id, f"no frames for a clip in the {assignment[r.clip_id]} split ({r.reason})")
        for clip, rel in zip(good["clip_id"], where):
            target = Path(path).parent / rel
            if not target.is_dir():
                report.add(path, clip, f"no frames for a clip in the {assignment[clip]} split ({target} is missing)")
                continue
            if not (root / clip).exists():  # (frames written into this very folder need no link)
                os.symlink(os.path.relpath(target, root), root / clip)
            linked += 1
    return linked


def write_clips_table(path: Path, clips: pd.DataFrame, assignment: dict, quality: list, report) -> int:
    """``clips.csv`` (microg4m.formats.clips_table): one row per clip that trim accepted
    (kept or rejected), its split (empty when not in the dataset), the filter's reason and
    its quality scores as the quality tables write them (empty where a table is missing or
    unreadable)."""
    scores = {}
    for table in sorted(map(str, quality)):
        try:
            frame = read_quality(table, as_text=True)  # the scores as the quality stage wrote them
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            faults.check(exc, table)  # no space, EIO, EACCES ...: the job fails, never a bad input
            report.add(table, "", f"unreadable quality table ({type(exc).__name__}: {exc}); its scores left empty")
            continue
        scores.update(frame.set_index("clip_id")[SCORES].to_dict("index"))
    ok = clips[clips["status"] == "ok"]
    rows = []
    for r in ok.itertuples(index=False):
        reason = "kept" if r.kept else (r.why[len("filter: "):] if r.why.startswith("filter: ") else r.why)
        rows.append({"clip_id": r.clip_id, "source_id": r.source_id, "clip_type": r.clip_type,
                     "kept": int(bool(r.kept)), "split": assignment.get(r.clip_id, ""), "reason": reason,
                     **scores.get(r.clip_id, {})})
    table = pd.DataFrame(rows, columns=CLIPS_COLUMNS).fillna("")
    with atomic_path(path, suffix=".csv") as tmp:
        table.to_csv(tmp, index=False, lineterminator="\n")
    return len(table)


def _lines(path: Path, lines: list[str]) -> None:
    write_text(path, "".join(f"{line}\n" for line in lines))


def _box_cells(r) -> str:
    return f"{r.video_id},{int(r.frame_stamp)},{fmt(r.xmin)},{fmt(r.ymin)},{fmt(r.xmax)},{fmt(r.ymax)}"


def _copy_bytes(src: Path, dst: Path) -> None:
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


def empty_splits(by_split: dict, ratios, labelled: bool) -> dict[str, str]:
    """Split -> why it is empty, for each split whose ratio is above 0 but that gets no clip
    (small datasets). ``labelled``: the AVA split files are written (they name them)."""
    n = sum(len(c) for c in by_split.values())
    counts = {s: len(c) for s, c in by_split.items()}
    shares = ":".join(f"{float(r):g}" for r in ratios)
    out = {}
    for split, ratio in zip(splits.SPLITS, ratios):
        if float(ratio) <= 0 or counts[split]:
            continue
        why = (f"no clip: {n} clip(s) at ratios {shares} give train {counts['train']}, val {counts['val']}, "
               f"test {counts['test']} (train and val get the floor of their share)")
        if labelled:
            names = [SPLIT_FILES[split]] + ([f"ava_{split}_predicted_boxes.csv"] if split != "train" else [])
            why += f"; {' and '.join(names)} not written (an empty ground truth crashes mmaction2's evaluation)"
        out[split] = why + "; add clips, or change export.split.ratios"
    return out


def run(
    *,
    manifests: list,
    decisions: list,
    tracks: list,
    out_dir,
    actions=None,
    label_map,
    seed: int = 42,
    ratios=(0.7, 0.1, 0.2),
    group_by: str = "clip",
    frames: list | None = None,
    notes=(),
    downloads: list | None = None,
    duplicates: str = "group",
    duplicate_pairs=None,
    contamination=None,
    quality: list | None = None,
) -> dict:
    """Write the export into ``out_dir`` (see the module docstring and docs/formats.md); return a summary.

    ``frames``: optional done lists of :func:`microg4m.stages.frames.run`; the dataset's clips
    are linked from them into ``frames/<clip>`` (the frame lists' root), and those whose
    frames failed are listed in ``input_report.tsv``. ``notes``: more
    ``(input, item, problem)`` rows for it (e.g. correction files that were not used).
    ``downloads``: the download tables; with them ``sources.csv``, ``redownload.tsv`` and
    ``datasheet.md`` are written too (datasheet.write_export).
    ``duplicate_pairs``: the duplicates stage's pairs table; ``duplicates`` says what to do
    with them (see :mod:`microg4m.formats.split_duplicates`). ``contamination``: its matches with
    reference sets, written with their split and warned about. ``quality``: the units'
    quality tables; with them ``clips.csv`` (every clip trim accepted, kept or not, with
    its split, the filter's reason and its scores) is written.
    """
    if group_by not in ("clip", "source"):
        raise ValueError(f"export.split.group_by must be 'clip' or 'source', got {group_by!r}")
    splits.targets(1, ratios)  # validates the ratios before any work
    split_duplicates.check_policy(duplicates)
    out = Path(out_dir)
    lmap = labels.read_label_map(label_map)  # a bad label map is fatal: nothing can be checked
    report = Report()
    for note in notes:
        report.add(*note)
    clips = load_clips(manifests, decisions, report)
    track_rows = load_tracks(tracks, clips, report)
    pairs, dropped = None, {}
    if duplicate_pairs is not None:
        try:
            pairs = split_duplicates.load(duplicate_pairs, set(clips.index[clips["kept"]]))
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            faults.check(exc, duplicate_pairs)  # no space, EIO, EACCES ...: the job fails, never a bad input
            report.add(duplicate_pairs, "", f"unreadable duplicates table ({type(exc).__name__}: {exc}); "
                       "splits made without it")
        if pairs is not None and duplicates == "drop":
            dropped = split_duplicates.drop_clips(pairs)
            for clip, stays in sorted(dropped.items()):
                report.add("export.split.duplicates", clip, f"dropped: near-duplicate of {stays}")
                clips.loc[clip, ["kept", "why"]] = [False, f"near-duplicate of {stays} (dropped)"]
            track_rows = track_rows[~track_rows["video_id"].isin(dropped)]
    boxes = keyframes(track_rows, clips, report)
    kept = clips[clips["kept"]]
    for c in sorted(set(kept.index) - set(boxes["video_id"])):
        report.add("tracks", c, "kept clip without any recorded person; no boxes")

    _lines(
        out / "boxes.csv", [BOXES_HEADER] + [f"{_box_cells(r)},{r.person_id}" for r in boxes.itertuples(index=False)]
    )
    _lines(
        out / "annotation_template.csv",
        [",".join(labels.ACTIONS_COLUMNS)]
        + [f"{r.video_id},{clips.at[r.video_id, 'clip_type']},{r.person_id}," for r in boxes.itertuples(index=False)],
    )
    _copy_bytes(Path(label_map), out / "label_map.pbtxt")

    summary = {"clips_kept": int(len(kept)), "persons": int(len(boxes)), "labels": False}
    have_labels = actions is not None and Path(actions).is_file()
    if actions is not None and not have_labels:
        report.add(actions, "", "actions file not found; annotation template only")
    ava = None
    if have_labels:
        valid, rep, dups = validate_labels(labels.read_actions(actions), clips, boxes, set(lmap["id"]))
        ava = valid.merge(boxes, on=["video_id", "person_id"], how="left", validate="many_to_one")
        ava = ava.sort_values(["video_id", "person_id", "line"], kind="stable").reset_index(drop=True)
        clip_actions = {c: set(g["action_id"]) for c, g in ava.groupby("video_id")}
        summary.update(labels=True, label_rows=int(len(ava)), label_problems=int(len(rep) - dups), duplicates=int(dups))
    else:
        for name in LABEL_OUTPUTS:  # stale label outputs from an earlier run with labels
            (out / name).unlink(missing_ok=True)
        clip_actions = {c: set() for c in kept.index}

    groups = dict(zip(clips["clip_id"], clips["source_id"])) if group_by == "source" else None
    if groups is not None and pairs is not None and duplicates == "group":
        groups = split_duplicates.linked_groups(pairs, groups)
    assignment = splits.assign(clip_actions, groups=groups, seed=seed, ratios=ratios)
    by_split = splits.clips_by_split(assignment)
    splits.write_split_ids(out / "splits", assignment)
    write_frame_lists(out / "frame_lists", by_split, clips["frames"].to_dict())
    summary["splits"] = {s: len(c) for s, c in by_split.items()}

    empty = empty_splits(by_split, ratios, ava is not None)
    for split, why in empty.items():
        report.add("export.split", split, why)
    summary["empty_splits"] = sorted(empty)
    crossing = []
    if pairs is not None:
        annotated = split_duplicates.annotate(pairs, assignment, dropped)
        split_duplicates.write(out, annotated)
        crossing = [split_duplicates.crossing_warning(r) for r in annotated.itertuples(index=False)
                    if r.decision == "crosses splits"]
        for warning in crossing:
            report.add("export.split.duplicates", "", warning)
        summary.update(duplicate_pairs=int(len(pairs)), duplicates_dropped=len(dropped),
                       duplicates_crossing=len(crossing))
    else:  # stale tables of an earlier run with duplicates
        for name in ("duplicates.tsv", "duplicates_by_source.tsv"):
            (out / name).unlink(missing_ok=True)
    (out / "contamination.tsv").unlink(missing_ok=True)
    if contamination is not None:
        try:
            found = split_duplicates.write_contamination(contamination, out, assignment)
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            faults.check(exc, contamination)  # no space, EIO, EACCES ...: the job fails, never a bad input
            report.add(contamination, "", f"unreadable contamination table ({type(exc).__name__}: {exc})")
            found = pd.DataFrame(columns=["clip_id"])
        for r in found.itertuples(index=False):
            report.add("duplicates.reference", r.clip_id,
                       f"{r.split} clip matches {r.reference_clip} of reference set {r.reference_set} "
                       f"(similarity {r.similarity})")
        summary["contaminated"] = int(found["clip_id"].nunique())
    if ava is not None:
        rep = pd.concat([rep, pd.DataFrame([("", "", f"split {s}: {w}") for s, w in empty.items()]
                                           + [("", "", w) for w in crossing],
                                           columns=rep.columns)], ignore_index=True)
        write_tsv(out / "label_report.tsv", rep)
        lines = [f"{_box_cells(r)},{r.action_id},{r.person_id}" for r in ava.itertuples(index=False)]
        _lines(out / "ava_format_with_header.csv", [AVA_HEADER] + lines)
        _lines(out / "ava_format.csv", lines)
        split_of_row = ava["video_id"].map(assignment).tolist()
        for split, name in SPLIT_FILES.items():
            # An empty split file is not written: mmaction2's evaluation fails on an empty
            # ground truth ("need at least one array to concatenate") after a whole epoch of
            # training, while a missing file stops PySlowFast and mmaction2 at start-up, naming it.
            part = [(ln, r) for ln, r, s in zip(lines, ava.itertuples(index=False), split_of_row) if s == split]
            files = [(name, [ln for ln, _ in part])]
            if split != "train":
                files.append((f"ava_{split}_predicted_boxes.csv", [f"{_box_cells(r)},,1" for _, r in part]))
            for file, rows in files:
                if rows:
                    _lines(out / file, rows)
                else:
                    (out / file).unlink(missing_ok=True)
    proposals.write(out, track_rows, clips, ava, assignment)

    ds = clips.loc[sorted(assignment), ["clip_id", "clip_type"]]
    persons = ava[["video_id", "person_id"]].drop_duplicates() if ava is not None else boxes[["video_id", "person_id"]]
    stats.write(
        out / "statistics",
        label_map=lmap,
        clips=ds,
        persons=persons,
        assignment=assignment,
        ava=ava[["video_id", "person_id", "action_id"]] if ava is not None else None,
    )
    if frames:
        summary["frames"] = _frames(frames, assignment, out, report)
    if downloads is not None:
        summary["sources"] = datasheet.write_export(out, downloads=downloads, clips=clips, assignment=assignment,
                                                    persons=persons, ava=ava, label_map=lmap)["sources"]
    if quality is not None:
        summary["clips_scored"] = write_clips_table(out / "clips.csv", clips, assignment, quality, report)
    report.write(out / "input_report.tsv")
    summary["input_problems"] = len(report.rows)
    return summary
