"""The release (rule release, ``microg4m release``): ``results/release/``, a Hugging Face
dataset repository made from the export, the VQA export and the run's records
(docs/release.md):

- ``README.md``, the dataset card (YAML front matter with ``configs``; the datasheet's
  sections; the Croissant RAI fields), ``croissant.json`` (Croissant 1.1 + RAI);
- ``data/``: the tables as Parquet (actions, tracks, captions, vqa, clips, sources, labels);
- ``videos/<split>/<clip>.mp4`` for the sources whose licence allows it (``release.videos``),
  faces blurred with ``release.blur_faces``; the other clips by source URL and seconds;
- ``shards/``: WebDataset shards (``release.shards``);
- ``splits.tsv``, ``redownload.tsv``, ``CHANGES.md``.

Withdrawn sources (``annotations/withdrawn.tsv``) leave every file; every other clip keeps
the split the previous release (``release.previous``) gave it. Clips, their files and
their boxes are found through the results index. The folder is built beside the output
and renamed into place: an interrupted release leaves the last one whole.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pandas as pd

from microg4m import config
from microg4m.common.atomic import write_text, write_tsv
from microg4m.formats import detector_record, provenance
from microg4m.formats.licences import read_licences
from microg4m.formats.records import records_frame
from microg4m.formats.results_index import ResultsIndex
from microg4m.formats.splits import SPLITS
from microg4m.formats.withdrawals import read_withdrawn
from microg4m.release import card, changes, croissant, history, rai, shards as shard_files
from microg4m.release.content import FPS, Content, build, read_export
from microg4m.release.metadata import AUTHORS, read_metadata
from microg4m.release.tables import ALL, TABLES, read as read_table, write as write_table
from microg4m.report import datasheet
from microg4m.vqa.export import load as load_captions

log = logging.getLogger(__name__)
KEYWORDS = ["action-detection", "spatio-temporal-action-localization", "ava", "video", "person-tracking",
            "microg4m"]


def release_date() -> str:
    """Today (UTC), or the day of ``SOURCE_DATE_EPOCH`` where it is set (reproducible builds)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    t = int(epoch) if epoch.strip().isdigit() else None
    return (dt.datetime.fromtimestamp(t, dt.timezone.utc) if t is not None
            else dt.datetime.now(dt.timezone.utc)).date().isoformat()


def _tsv(path) -> pd.DataFrame | None:
    if path is None or not Path(path).is_file():
        return None
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


def _known(content: Content, index: ResultsIndex, *, provenance_table, funnel, detector, versions, team_summary,
           pipeline: dict, blur: bool, previous_version: str, withdrawn_all: int) -> rai.Known:
    k = rai.Known(version=content.version, previous_version=previous_version, blur_faces=blur, pipeline=pipeline)
    src, clips = content.sources, content.tables["clips"]
    k.sources, k.clips = len(src), len(clips)
    k.local_sources = int((src["extractor"] == "local file").sum())
    k.downloaded_sources = k.sources - k.local_sources
    k.ytdlp_versions = sorted({v for v in src["ytdlp_version"] if v})
    dates = sorted(d[:10] for d in src["downloaded_at"] if d)
    k.download_dates = [dates[0], dates[-1]] if dates else []
    k.clips_with_video = int((clips["video"] != "").sum())
    k.splits = {s: int((clips["split"] == s).sum()) for s in SPLITS}
    k.clip_types = {"real footage (r)": int((clips["clip_type"] == "r").sum()),
                    "film (m)": int((clips["clip_type"] == "m").sum())}
    k.top_source_share = float(clips["source_id"].value_counts(normalize=True).max()) if len(clips) else 0.0
    k.licences = dict(sorted(Counter(src["license"]).items()))
    k.persons = int(content.tables["tracks"][["video_id", "person_id"]].drop_duplicates().shape[0])
    if "actions" in content.tables:
        names = dict(zip(content.tables["labels"]["id"], content.tables["labels"]["name"]))
        acts = content.tables["actions"]
        k.label_rows = len(acts)
        k.action_counts = {f"{names.get(a, a)} ({a})": int(n) for a, n in sorted(Counter(acts["action_id"]).items())}
    if "captions" in content.tables:
        k.captions, k.qa_pairs = len(content.tables["captions"]), len(content.tables["vqa"])
    records = records_frame([provenance_table]) if provenance_table and Path(provenance_table).is_file() else None
    if records is not None:
        k.sources_listed = len(records)
        failed = records[records["status"] != "ok"]
        k.failed_by_class = dict(sorted(Counter(c or "other" for c in failed["reason_class"]).items()))
    else:
        k.sources_listed = k.sources
    if (f := _tsv(funnel)) is not None:
        k.funnel = [(r.step, int(r.count)) for r in f.itertuples(index=False)]
    if detector and Path(detector).is_file():
        rec = detector_record.read(detector)
        k.detector = {key: rec.get(key) for key in ("weights", "sha256", "runtime", "precision")}
    if (v := _tsv(versions)) is not None:
        tools = dict(zip(v["tool"], v["version"]))
        k.tools = {t: (tools[t].split()[2] if t == "ffmpeg" and len(tools[t].split()) > 2 else tools[t])
                   for t in ("ultralytics", "boxmot", "scenedetect", "yt-dlp", "ffmpeg") if tools.get(t)}
    if team_summary and Path(team_summary).is_file():
        k.team = json.loads(Path(team_summary).read_text(encoding="utf-8"))
    k.withdrawn = withdrawn_all
    corrected, models = set(), set()
    for unit in sorted({c.unit for c in content.clips.values()}):
        files = index.files(unit)
        if (rep := _tsv(files.corrections_report)) is not None and "status" in rep:
            corrected |= set(rep.loc[rep["status"] == "applied", "clip_id"]) & set(content.clips)
        if files.vqa_drafts.is_file():
            try:
                model = json.loads(files.vqa_drafts.read_text(encoding="utf-8")).get("model")
            except (OSError, ValueError):
                model = None
            if model:
                models.add(str(model))
    k.corrected_clips, k.draft_models = len(corrected), sorted(models)
    split = pipeline.get("split", {})
    dup = pipeline.get("duplicates_enabled")
    k.duplicates = (f"found by perceptual hashes; export.split.duplicates {split.get('duplicates', 'group')} "
                    f"(group_by {split.get('group_by', 'clip')})" if dup else "")
    return k


def _table_changes(content: Content, previous: history.Previous | None) -> dict[str, tuple[int, int]]:
    """Per table, rows added and removed among the clips both releases hold."""
    if previous is None:
        return {}
    both = set(previous.assignment) & set(content.assignment)
    out = {}
    for name, df in content.tables.items():
        t = TABLES[name]
        if not t.per_split:
            continue
        old_files = sorted((previous.folder / "data" / name).glob("*.parquet"))
        old = pd.concat([read_table(f) for f in old_files], ignore_index=True) if old_files else None
        if old is None or list(old.columns) != t.names:
            continue
        rows = lambda d: Counter(map(tuple, d[d["video_id"].isin(both)][t.names].astype(str).to_numpy().tolist()))
        new_rows, old_rows = rows(df), rows(old)
        out[name] = (sum((new_rows - old_rows).values()), sum((old_rows - new_rows).values()))
    return out


def _place_videos(content: Content, out: Path, *, blur: bool, face_threshold: float, face_mask_scale: float,
                  encode: dict) -> dict[str, Path]:
    """The released mp4s (linked, copied or blurred); clip -> its file."""
    files = {}
    clips = content.tables["clips"]
    blurrer = None
    if blur and (clips["video"] != "").any():
        from microg4m.engines.face_blur import FaceBlur

        blurrer = FaceBlur(face_threshold, face_mask_scale)
    for r in clips.itertuples(index=False):
        if not r.video:
            continue
        src, dst = content.clips[r.video_id].path, out / r.video
        dst.parent.mkdir(parents=True, exist_ok=True)
        if blurrer is not None:
            n = blurrer.blur_clip(src, dst, fps=FPS, crf=encode.get("crf", 23), preset=encode.get("preset", "veryfast"))
            log.info("release: %s: faces on %d frame(s), blurred", r.video_id, n)
        else:
            try:
                os.link(src, dst)  # the clips are never written in place: a link is a copy
            except OSError:
                shutil.copyfile(src, dst)
        files[r.video_id] = dst
    if blurrer is not None:
        content.tables["clips"]["faces_blurred"] = clips["video"] != ""
    return files


def _samples(content: Content, keyframes: pd.DataFrame, captions: list[dict] | None) -> dict[str, dict]:
    """Clip -> the JSON of its WebDataset sample (each table grouped once: linear in the rows)."""
    tracks = {c: g for c, g in content.tables["tracks"].groupby("video_id", sort=False)}
    acts: dict[tuple, list[int]] = {}
    if "actions" in content.tables:
        for r in content.tables["actions"].itertuples(index=False):
            acts.setdefault((r.video_id, int(r.person_id)), []).append(int(r.action_id))
    kf = {c: g for c, g in keyframes.groupby("video_id", sort=False)}
    caps = {r["video_id"]: r for r in (captions or [])}
    out = {}
    for c in content.tables["clips"].itertuples(index=False):
        tr, cap = tracks.get(c.video_id), caps.get(c.video_id)
        persons = [{"person_id": int(k.person_id), "frame_stamp": int(k.frame_stamp),
                    "box": [float(k.xmin), float(k.ymin), float(k.xmax), float(k.ymax)],
                    "actions": sorted(acts.get((c.video_id, int(k.person_id)), []))}
                   for k in (kf[c.video_id].itertuples(index=False) if c.video_id in kf else [])]
        out[c.video_id] = {
            "video_id": c.video_id, "source_id": c.source_id, "split": c.split, "clip_type": c.clip_type,
            "start_s": int(c.start_s), "end_s": int(c.end_s), "frames": int(c.frames), "fps": FPS,
            "width": int(c.width), "height": int(c.height), "license": c.license, "source_url": c.source_url,
            "video": bool(c.video), "faces_blurred": bool(c.faces_blurred),
            "tracks": [] if tr is None else [[int(r.frame_id), int(r.person_id), float(r.xmin), float(r.ymin),
                                               float(r.xmax), float(r.ymax)] for r in tr.itertuples(index=False)],
            "keyframes": persons,
            "caption": cap["caption"] if cap else None, "qa_pairs": cap["qa_pairs"] if cap else []}
    return out


def run(*, results, out_dir, export_dir=None, vqa=None, previous=None, withdrawn=None, licences=None,
        metadata=None, team_summary=None, duplicate_pairs=None, funnel=None, provenance_table=None, detector=None,
        versions=None, version: str = "1.0.0", license: str = "cc-by-4.0", videos="auto",
        redistributable=None, shards: dict | None = None, blur_faces: bool = False,
        face_threshold: float = 0.2, face_mask_scale: float = 1.3, split: dict | None = None,
        pipeline: dict | None = None, encode: dict | None = None) -> dict:
    """Write the release into ``out_dir`` (see the module docstring); return a summary."""
    defaults = config.defaults()["release"]
    shards = defaults["shards"] | (shards or {})
    redistributable = defaults["redistributable"] if redistributable is None else redistributable
    out = Path(out_dir).resolve()
    if previous is not None and (Path(previous).resolve() == out or out in Path(previous).resolve().parents):
        raise ValueError(f"release.previous {previous} is inside the release's own folder {out_dir}, which is "
                         "written anew: keep a copy of each published release elsewhere (e.g. releases/1.0.0)")
    prev = history.read_previous(previous) if previous is not None else None
    if prev is not None and prev.version == version:
        raise ValueError(f"release.version {version} is the version of release.previous {previous}; "
                         "a new release takes a new version")
    index = ResultsIndex(results)
    export = read_export(export_dir or Path(results) / "export")
    gone = read_withdrawn(withdrawn)
    meta = read_metadata(metadata, rai.FIELDS)
    caps = load_captions(vqa) if vqa is not None and Path(vqa).is_file() else None
    content = build(index=index, export=export, captions=caps, previous=prev, withdrawn=gone,
                    by_hand=read_licences(licences), duplicate_pairs=duplicate_pairs, split=split or {},
                    videos=videos, redistributable=redistributable, version=version)
    for note in content.notes:
        log.warning("release: %s", note)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        summary = _write(content, tmp, export=export, prev=prev, meta=meta, caps=caps, version=version,
                         licence=license, shards=shards, blur=blur_faces, face_threshold=face_threshold,
                         face_mask_scale=face_mask_scale, encode=encode or {}, index=index,
                         known_inputs=dict(provenance_table=provenance_table, funnel=funnel, detector=detector,
                                           versions=versions, team_summary=team_summary),
                         pipeline=(pipeline or {}) | {"split": split or {}}, gone=gone)
        os.chmod(tmp, 0o755)
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary


def _write(content: Content, out: Path, *, export, prev, meta, caps, version, licence, shards, blur,
           face_threshold, face_mask_scale, encode, index, known_inputs, pipeline, gone) -> dict:
    date = release_date()
    present: dict[str, list[str]] = {}
    for name in ("actions", "tracks", "captions", "vqa", "clips", "sources", "labels"):
        if name not in content.tables:
            continue
        df, t = content.tables[name], TABLES[name]
        if name == "clips":
            continue  # written once the videos are placed (faces_blurred)
        files = ([write_table(t, df[df["split"] == s], out, s) for s in SPLITS] if t.per_split
                 else [write_table(t, df, out)])
        present[name] = [f for f in files if f]
    videos = _place_videos(content, out, blur=blur, face_threshold=face_threshold, face_mask_scale=face_mask_scale,
                           encode=encode)
    clips = content.tables["clips"]
    present["clips"] = [f for f in (write_table(TABLES["clips"], clips[clips["split"] == s], out, s)
                                    for s in SPLITS) if f]
    present = {n: present[n] for n in ("actions", "tracks", "captions", "vqa", "clips", "sources", "labels")
               if n in present}

    shard_list = []
    if shards["enabled"]:
        records = _samples(content, export.keyframes[export.keyframes["video_id"].isin(content.assignment)], caps)
        samples: dict[str, list] = {}
        for cid, s in content.assignment.items():
            samples.setdefault(s, []).append((cid, records[cid], videos.get(cid)))
        shard_list = shard_files.write(out, samples, max_samples=shards["max_samples"],
                                       max_size_mb=shards["max_size_mb"])

    splits_df = clips[["video_id", "source_id", "split"]].assign(added=clips["video_id"].map(content.added))
    history.write_splits(out / history.SPLITS_FILE, splits_df)
    src = content.sources
    write_tsv(out / "redownload.tsv", src.sort_values("source_id")[provenance.REDOWNLOAD_COLUMNS])

    added = Counter(content.assignment[c] for c in content.assignment if prev is None or c not in prev.assignment)
    previous_version = prev.version if prev is not None else ""
    new_section = changes.section(version=version, date=date, previous_version=previous_version,
                                  withdrawn=content.withdrawn, removed=content.removed, added=dict(added),
                                  table_changes=_table_changes(content, prev), notes=content.notes)
    write_text(out / "CHANGES.md", changes.document(new_section, prev.changes if prev is not None else ""))
    line = changes.summary(version=version, previous_version=previous_version, withdrawn=content.withdrawn,
                           removed=content.removed, added=dict(added))

    known = _known(content, index, pipeline=pipeline, blur=blur, previous_version=previous_version,
                   withdrawn_all=len(gone), **known_inputs)
    rai_fields = rai.fields(known, meta.get("rai", {}))
    sheet = datasheet.render(_datasheet_facts(content, known), meta.get("datasheet", {}))
    per_split = {}
    for name in present:
        df = content.tables[name]
        per_split[name] = ({s: int((df["split"] == s).sum()) for s in SPLITS} if TABLES[name].per_split
                           else {ALL: len(df)})
    counts = {"clips": len(clips), "sources": len(src), "per_split": per_split}
    sources_rows = [[r.source_id, r.clips, r.license, r.license_from, "yes" if r.videos else "no (ids and URLs)"]
                    for r in src.sort_values("source_id").itertuples(index=False)]
    keywords = meta.get("keywords") or KEYWORDS
    write_text(out / "README.md", card.render(meta=meta, licence=licence, version=version, date=date,
                                              present=present, counts=counts, sources=sources_rows,
                                              datasheet_md=sheet, rai=rai_fields, changes_line=line,
                                              shards=shard_list, videos=len(videos), blur=blur, keywords=keywords))
    description = (meta.get("description") or f"{AUTHORS} What the dataset is, in a paragraph.") + (
        f" {len(clips)} clips of {len(src)} source videos; release {version}. {line}")
    doc = croissant.build(meta=meta, description=description, version=version, date=date, licence=licence,
                          rai=rai_fields, present=present, videos=bool(videos), shards=bool(shard_list),
                          keywords=keywords)
    write_text(out / "croissant.json", json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return {"version": version, "clips": len(clips), "sources": len(src), "videos": len(videos),
            "shards": len(shard_list), "withdrawn": sorted(content.withdrawn), "removed": len(content.removed),
            "added": int(sum(added.values())), "splits": known.splits, "notes": content.notes}


def _datasheet_facts(content: Content, known: rai.Known) -> datasheet.Facts:
    f = datasheet.Facts()
    f.sources_listed, f.sources_downloaded = known.sources_listed, known.sources_listed - sum(
        known.failed_by_class.values())
    f.failed_by_class = known.failed_by_class
    f.sources_in_dataset, f.clips = known.sources, known.clips
    f.clips_listed = next((n for s, n in known.funnel if s == "clips"), known.clips)
    f.clips_by_type, f.persons = known.clip_types, known.persons
    f.actions_in_map = len(content.tables["labels"])
    if "actions" in content.tables:
        f.label_rows = known.label_rows
        f.actions_used = len(known.action_counts)
        f.action_counts = known.action_counts
    f.splits, f.licences = known.splits, known.licences
    return f
