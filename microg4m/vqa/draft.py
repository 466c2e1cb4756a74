"""Draft captions and QA pairs for the kept clips of a job unit with a vision-language model.

Per clip: ``frames`` evenly spread frames and the caption prompt go to the chat endpoint
(:mod:`microg4m.vqa.vlm`); the reply is the draft caption. The QA prompt with that caption
asks for candidate pairs along the paper's dimensions; :func:`microg4m.vqa.rank.refine`
drops those about sound, intent or anything not visible, ranks the rest and keeps the
best six (at most one "Not mentioned"). Clips run concurrently (``concurrency`` requests
in flight) so that a batching server such as vLLM stays busy.

Prompt templates use ``$name`` placeholders (:class:`string.Template`, so JSON braces in
a prompt need no escaping): caption prompt ``$video_id``, ``$source_id``, ``$title`` (the
source video's title from the download record: reference material such as a mission or
crew name), ``$frames``; QA prompt ``$caption``, ``$candidates``, ``$keep``, ``$video_id``.

Output ``vqa_drafts/{unit}.json``: the model, endpoint, prompt hash and settings, and per
clip ``video_id, status (ok | failed), reason, caption, qa_pairs, candidates`` (every
candidate with its scores and why it was kept or dropped), ``model, prompt_hash, time``
(UTC, when the draft was made), ``attempts`` and ``seconds``. A clip whose endpoint is
slow, down or answers nonsense is recorded as failed with the reason; the others go on.
The drafts never touch a person's review (annotations/, see microg4m.annotate.vqa_store).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import string
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from microg4m.common.atomic import write_text
from microg4m.formats.records import read_records
from microg4m.formats.decisions import read_decisions
from microg4m.formats.clips import kept_clips
from microg4m.formats.manifest import clip_file, read_manifest
from microg4m.vqa.vlm import DraftFailed, Endpoint, sample_frames
from microg4m.vqa.rules import MAX_PAIRS, one_line
from microg4m.vqa.rank import parse_candidates, refine

log = logging.getLogger(__name__)

ENDPOINT_KEYS = ("url", "model", "api_key_env", "timeout_seconds", "retries", "backoff_seconds", "temperature",
                 "max_tokens")


def prompt_hash(caption_prompt: str, qa_prompt: str) -> str:
    """The first 16 hex digits of SHA-256 over both templates (caption, NUL, QA)."""
    return hashlib.sha256(f"{caption_prompt}\0{qa_prompt}".encode("utf-8")).hexdigest()[:16]


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_caption(text: str) -> str:
    caption = one_line(text.strip().strip("`").strip())
    if caption.lower().startswith("caption:"):
        caption = caption[len("caption:"):].strip()
    if len(caption.split()) < 3:
        raise ValueError(f"caption too short: {caption!r}")
    return caption


def draft_clip(endpoint: Endpoint, path: Path, clip: dict, *, title: str, frames: int, frame_size: int,
               jpeg_quality: int, caption_prompt: str, qa_prompt: str, candidates: int, keep: int,
               unanswerable: bool, phash: str) -> dict:
    """One clip's draft record (never raises for a failed request: the record says why)."""
    t0 = time.monotonic()
    rec = {"video_id": clip["clip_id"], "status": "failed", "reason": "", "caption": "", "qa_pairs": [],
           "candidates": [], "model": endpoint.model, "prompt_hash": phash, "time": "", "attempts": 0}
    stage = "frames"
    try:
        images = sample_frames(path, frames, frame_size, jpeg_quality, total=int(clip["frames"]))
        stage = "caption"
        text = string.Template(caption_prompt).safe_substitute(
            video_id=clip["clip_id"], source_id=clip["source_id"], title=title, frames=len(images))
        rec["caption"], n = endpoint.ask(text, parse_caption, images)
        rec["attempts"] += n
        stage = "qa"
        text = string.Template(qa_prompt).safe_substitute(
            caption=rec["caption"], candidates=candidates, keep=keep, video_id=clip["clip_id"])
        cands, n = endpoint.ask(text, parse_candidates)
        rec["attempts"] += n
        rec["qa_pairs"], rec["candidates"] = refine(cands, rec["caption"], keep=keep, unanswerable=unanswerable)
        if not rec["qa_pairs"]:
            rec["reason"] = f"qa: no usable candidate among {len(cands)} (see candidates)"
        else:
            rec["status"] = "ok"
    except DraftFailed as exc:
        rec["reason"] = f"{stage}: {exc}"
        rec["attempts"] += exc.attempts
    except (OSError, ValueError, RuntimeError) as exc:  # an unreadable clip file
        rec["reason"] = f"{stage}: {' '.join(str(exc).split())}"
    rec["time"] = now()
    rec["seconds"] = round(time.monotonic() - t0, 3)
    return rec


def run(manifest, decisions, out, *, downloads=None, url: str, model: str, api_key_env: str | None = None,
        frames: int = 8, frame_size: int = 448, jpeg_quality: int = 85, caption_prompt: str, qa_prompt: str,
        candidates: int = 12, keep: int = MAX_PAIRS, unanswerable: bool = True, concurrency: int = 8,
        **endpoint_settings) -> dict:
    """Draft every kept clip of the unit into ``out`` (JSON); return the counts."""
    unknown = set(endpoint_settings) - set(ENDPOINT_KEYS)
    if unknown:
        raise ValueError(f"vqa.draft: unknown settings {sorted(unknown)}")
    if not 1 <= keep <= MAX_PAIRS:
        raise ValueError(f"vqa.draft.keep must be 1..{MAX_PAIRS}, got {keep}")
    clips = kept_clips(read_manifest(manifest), read_decisions(decisions))
    titles = {}
    for path in [downloads] if isinstance(downloads, (str, os.PathLike)) else (downloads or []):
        titles.update({r["source_id"]: r.get("title") or "" for r in read_records(path)})
    phash = prompt_hash(caption_prompt, qa_prompt)
    for name in ("httpx", "httpx2"):  # one INFO line per request would bury the per-clip results
        logging.getLogger(name).setLevel(logging.WARNING)
    records = []
    if len(clips):
        endpoint = Endpoint(url=url, model=model, api_key_env=api_key_env, **endpoint_settings)
        opts = dict(frames=frames, frame_size=frame_size, jpeg_quality=jpeg_quality, caption_prompt=caption_prompt,
                    qa_prompt=qa_prompt, candidates=candidates, keep=keep, unanswerable=unanswerable, phash=phash)
        rows = clips.to_dict("records")

        def one(row):
            rec = draft_clip(endpoint, clip_file(manifest, row["clip_id"]), row,
                             title=titles.get(row["source_id"]) or "unknown", **opts)
            log.info("%s: %s%s", rec["video_id"], rec["status"], f" ({rec['reason']})" if rec["reason"] else "")
            return rec

        with ThreadPoolExecutor(max_workers=max(1, int(concurrency))) as pool:
            records = list(pool.map(one, rows))
    counts = {"clips": len(records), "ok": sum(r["status"] == "ok" for r in records)}
    counts["failed"] = counts["clips"] - counts["ok"]
    doc = {"model": model, "endpoint": url, "prompt_hash": phash,
           "settings": {"frames": frames, "frame_size": frame_size, "candidates": candidates, "keep": keep,
                        "unanswerable": unanswerable, "temperature": endpoint_settings.get("temperature"),
                        "max_tokens": endpoint_settings.get("max_tokens")},
           "counts": counts, "clips": sorted(records, key=lambda r: r["video_id"])}
    write_text(out, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return counts

