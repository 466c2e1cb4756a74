"""The paper's vision-language-model baseline for HAR (appendix G.5, Table 11).

For every tracked person of every kept clip: ``frames`` frames, evenly spread over the
frames where the person has a box, each with the person marked by a red box and the label
``ID <person_id>``, go to an OpenAI-compatible chat endpoint (:mod:`microg4m.vqa.vlm`, the
client the caption drafts use) with a prompt that lists the label map's ids and names. The
reply must hold a JSON list of action ids; ids that are not in the label map (and items
that are not ids) are dropped and counted. A reply without a JSON list is malformed: it is
retried, then the person is recorded as failed with the reason, and the run goes on.

The answers are written per unit (``results/har_vlm/{unit}.json``, rule ``har_vlm``)::

    {"model", "endpoint", "prompt_hash", "label_ids", "settings",
     "counts": {"persons", "ok", "failed", "invalid_ids"},
     "persons": [{"video_id", "person_id", "status": "ok" | "failed", "reason",
                  "actions": [ids], "invalid": [what was dropped, as text], "reply",
                  "frames": [1-based frame numbers shown], "model", "prompt_hash",
                  "time", "attempts", "seconds"}, ...]}   (sorted by clip, person)

Scored as in Table 11 (:func:`evaluate`): every ground-truth person of the split is one
predicted box (its ground-truth box) with score 1 for each action the model named and 0
for the others (a person without an answer, or whose request failed: all 0), then the HAR
metrics of :mod:`microg4m.evaluate.har`. With 0/1 scores most scores tie, so the mAP
depends on the evaluator's order among ties; ``map_tie_range`` gives its range.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import string
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import cv2
import numpy as np

from microg4m.common.atomic import write_text
from microg4m.common.media import iter_frames
from microg4m.evaluate import har
from microg4m.formats.decisions import read_decisions
from microg4m.formats.clips import kept_clips
from microg4m.formats.manifest import clip_file, read_manifest
from microg4m.formats.tracks import read_tracks
from microg4m.formats.vlm_answers import read_answers
from microg4m.vqa.vlm import DraftFailed, Endpoint, data_url, fit, frame_indices

log = logging.getLogger(__name__)

RED = (0, 0, 255)  # BGR
ENDPOINT_KEYS = ("url", "model", "api_key_env", "timeout_seconds", "retries", "backoff_seconds", "temperature",
                 "max_tokens")
FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def action_lines(labels: har.LabelMap) -> str:
    return "\n".join(f"{i}: {n}" for i, n in zip(labels.ids, labels.names))


def highlight(img: np.ndarray, box, person_id: int) -> np.ndarray:
    """The frame with the person's box in red and ``ID n`` on a red tag above it (inside
    the frame when the box touches its top)."""
    out = img.copy()
    h, w = out.shape[:2]
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    thick = max(3, round(max(h, w) / 150))
    cv2.rectangle(out, (x1, y1), (x2, y2), RED, thick)
    label = f"ID {person_id}"
    scale = max(0.4, max(h, w) / 900)
    (tw, th), base = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, scale, thick)
    top = y1 - th - base - 2 * thick if y1 - th - base - 2 * thick >= 0 else y1
    left = min(max(0, x1), max(0, w - tw - 2 * thick))
    cv2.rectangle(out, (left, top), (left + tw + 2 * thick, top + th + base + 2 * thick), RED, -1)
    cv2.putText(out, label, (left + thick, top + th + thick), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255),
                max(1, thick // 2), cv2.LINE_AA)
    return out


def parse_actions(reply: str, valid: set[int]) -> tuple[list[int], list[str], str]:
    """(valid ids, what was dropped, the reply) from a reply holding a JSON list of ids (or an
    object with one list); a ValueError when there is none."""
    text = reply.strip()
    m = FENCE.search(text)
    candidates = [m.group(1).strip()] if m else []
    candidates.append(text)
    lo, hi = text.find("["), text.rfind("]")
    if 0 <= lo < hi:
        candidates.append(text[lo:hi + 1])
    value = None
    for cand in candidates:
        try:
            value = json.loads(cand)
        except ValueError:
            continue
        if isinstance(value, dict):
            lists = [v for v in value.values() if isinstance(v, list)]
            value = lists[0] if len(lists) == 1 else None
        if isinstance(value, list):
            break
        value = None
    if value is None:
        raise ValueError(f"no JSON list of action ids in {' '.join(reply.split())[:80]!r}")
    ids, invalid = set(), []
    for item in value:
        n = None
        if isinstance(item, int) and not isinstance(item, bool):
            n = item
        elif isinstance(item, float) and item.is_integer():
            n = int(item)
        elif isinstance(item, str) and item.strip().isdigit():
            n = int(item.strip())
        if n is not None and n in valid:
            ids.add(n)
        else:
            invalid.append(json.dumps(item) if not isinstance(item, str) else item)
    return sorted(ids), invalid, reply


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def person_images(path, persons: dict[int, "np.ndarray"], n: int, size: int, quality: int):
    """Per person: (data URLs, frame numbers). ``persons``: person id -> its track rows as an
    array ``frame_id, x1, y1, x2, y2`` (pixels)."""
    chosen = {}
    for pid, rows in persons.items():
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        chosen[pid] = [rows[i] for i in frame_indices(len(rows), n)]
    wanted = {int(r[0]) for picks in chosen.values() for r in picks}
    frames = {i + 1: img for i, img in enumerate(iter_frames(path, limit=max(wanted))) if i + 1 in wanted}
    out = {}
    for pid, picks in chosen.items():
        missing = [int(r[0]) for r in picks if int(r[0]) not in frames]
        if missing:
            raise ValueError(f"{path}: frame(s) {missing} of person {pid} not decodable")
        urls = []
        for r in picks:
            img, k = fit(frames[int(r[0])], size)  # drawn at the size sent: the lines stay sharp
            urls.append(data_url(highlight(img, np.asarray(r[1:5]) * k, pid), size, quality,
                                 f"{path}: frame {int(r[0])}"))
        out[pid] = (urls, [int(r[0]) for r in picks])
    return out


def ask_clip(endpoint: Endpoint, path, clip: str, persons: dict, labels: har.LabelMap, *, prompt: str, phash: str,
             frames: int, frame_size: int, jpeg_quality: int) -> list[dict]:
    """The records of one clip's persons (never raises for a failed request)."""
    valid = set(labels.ids)
    records, reason = [], ""
    try:
        images = person_images(path, persons, frames, frame_size, jpeg_quality)
    except (OSError, ValueError, RuntimeError) as exc:
        images, reason = {}, f"frames: {' '.join(str(exc).split())}"
    for pid in sorted(persons):
        t0 = time.monotonic()
        rec = {"video_id": clip, "person_id": int(pid), "status": "failed", "reason": "", "actions": [],
               "invalid": [], "reply": "", "frames": [], "model": endpoint.model, "prompt_hash": phash, "time": "",
               "attempts": 0}
        if pid not in images:
            rec["reason"] = reason
        else:
            urls, rec["frames"] = images[pid]
            text = string.Template(prompt).safe_substitute(video_id=clip, person_id=pid, frames=len(urls),
                                                           actions=action_lines(labels))
            try:
                (rec["actions"], rec["invalid"], reply), rec["attempts"] = endpoint.ask(
                    text, lambda r: parse_actions(r, valid), urls)
                rec["reply"] = reply[:1000]
                rec["status"] = "ok"
            except DraftFailed as exc:
                rec["reason"], rec["attempts"] = str(exc), exc.attempts
        rec["time"] = now()
        rec["seconds"] = round(time.monotonic() - t0, 3)
        records.append(rec)
    return records


def run(manifest, decisions, tracks, label_map, out, *, clips=None, url: str, model: str,
        api_key_env: str | None = None, frames: int = 8, frame_size: int = 448, jpeg_quality: int = 85,
        prompt: str, concurrency: int = 8, **endpoint_settings) -> dict:
    """Ask about every person of the unit's kept clips (only ``clips`` when given); write the
    answers JSON ``out``; return the counts."""
    unknown = set(endpoint_settings) - set(ENDPOINT_KEYS)
    if unknown:
        raise ValueError(f"evaluate.vlm: unknown settings {sorted(unknown)}")
    labels = har.LabelMap.read(label_map)
    kept = kept_clips(read_manifest(manifest), read_decisions(decisions))
    if clips is not None:
        kept = kept[kept["clip_id"].isin(set(clips))]
    t = read_tracks(tracks)
    t = t[t["video_id"].isin(set(kept["clip_id"]))]
    by_clip = {clip: {int(pid): p[["frame_id", "xmin", "ymin", "xmax", "ymax"]].to_numpy(dtype=float)
                      for pid, p in g.groupby("person_id")}
               for clip, g in t.groupby("video_id")}
    phash = prompt_hash(prompt)
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    records = []
    if by_clip:
        endpoint = Endpoint(url=url, model=model, api_key_env=api_key_env, **endpoint_settings)
        opts = dict(prompt=prompt, phash=phash, frames=frames, frame_size=frame_size, jpeg_quality=jpeg_quality)

        def one(clip):
            recs = ask_clip(endpoint, clip_file(manifest, clip), clip, by_clip[clip], labels, **opts)
            for r in recs:
                log.info("%s person %s: %s %s", clip, r["person_id"], r["status"], r["reason"] or r["actions"])
            return recs

        with ThreadPoolExecutor(max_workers=max(1, int(concurrency))) as pool:
            records = [r for recs in pool.map(one, sorted(by_clip)) for r in recs]
    counts = {"persons": len(records), "ok": sum(r["status"] == "ok" for r in records)}
    counts["failed"] = counts["persons"] - counts["ok"]
    counts["invalid_ids"] = sum(len(r["invalid"]) for r in records)
    doc = {"model": model, "endpoint": url, "prompt_hash": phash, "label_ids": labels.ids,
           "settings": {"frames": frames, "frame_size": frame_size, "jpeg_quality": jpeg_quality,
                        "temperature": endpoint_settings.get("temperature"),
                        "max_tokens": endpoint_settings.get("max_tokens")},
           "counts": counts, "persons": sorted(records, key=lambda r: (r["video_id"], r["person_id"]))}
    write_text(out, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return counts


# ---------------------------------------------------------------- scoring (Table 11)


def predictions(answers: dict, truth: har.Truth, labels: har.LabelMap) -> tuple[har.Predictions, dict]:
    """One predicted box per ground-truth person (its box), 1 for each action the model named."""
    col = {a: j for j, a in enumerate(labels.ids)}
    people = truth.rows.drop_duplicates(["key", "person_id"])
    keys, boxes, scores = [], [], []
    counts = {"persons": len(people), "answered": 0, "failed": 0, "unanswered": 0, "invalid_ids": 0}
    for r in people.itertuples(index=False):
        vec = np.zeros(len(col))
        rec = answers.get((r.video_id, int(r.person_id)))
        if rec is None:
            counts["unanswered"] += 1
        elif rec.get("status") != "ok":
            counts["failed"] += 1
        else:
            counts["answered"] += 1
            counts["invalid_ids"] += len(rec.get("invalid", []))
            for a in rec.get("actions", []):
                if a in col:
                    vec[col[a]] = 1.0
        keys.append(r.key)
        boxes.append((r.x1, r.y1, r.x2, r.y2))
        scores.append(vec)
    preds = har.Predictions(keys, np.array(boxes, dtype=float).reshape(-1, 4),
                            np.array(scores).reshape(-1, len(col)))
    return preds, counts


def evaluate(answer_paths, gt, label_map) -> dict:
    """Table 11's figures of the answers on the ground truth ``gt``."""
    labels = har.LabelMap.read(label_map)
    truth = har.Truth.read(gt, labels)
    if (truth.rows["person_id"] < 1).any():
        raise ValueError(f"{gt}: the VLM's answers are matched by person: the ground truth needs its 8th column "
                         "(person_id), as the export writes it")
    preds, counts = predictions(read_answers(answer_paths), truth, labels)
    result = har.evaluate(gt, None, label_map, predictions=preds)
    result["vlm"] = counts
    result["inputs"]["detections"] = [str(p) for p in answer_paths]
    return result


def score_split(answer_paths, export_dir, split: str, json_path, per_class) -> dict:
    """Rule har_vlm_eval: Table 11's figures on the export's ``split``. Without ground truth
    for it (no labels yet, or a split too small to get a clip) the JSON says so and the
    per-class table has its header only: a run without labels goes on."""
    export_dir = Path(export_dir)
    gt, label_map = export_dir / har.SPLIT_FILES[split], export_dir / "label_map.pbtxt"
    if not gt.is_file() or not gt.stat().st_size:
        doc = {"status": "no ground truth", "split": split,
               "reason": f"{gt} is missing or empty (no action labels yet, or no clip in this split)",
               "answers": read_counts(answer_paths)}
        write_text(json_path, json.dumps(doc, indent=2) + "\n")
        write_text(per_class, ",".join(har.PER_CLASS_COLUMNS) + "\n")
        return doc
    result = evaluate(answer_paths, gt, label_map)
    result["status"], result["split"] = "ok", split
    return har.write(result, json_path=json_path, per_class=per_class)


def read_counts(paths) -> dict:
    answers = read_answers(paths)
    return {"persons": len(answers), "ok": sum(r.get("status") == "ok" for r in answers.values()),
            "invalid_ids": sum(len(r.get("invalid", [])) for r in answers.values())}
