"""Duplicates stage: near-duplicate clip pairs across sources, from the signatures.

Matching (see docs/duplicates.md):

1. Every informative sampled frame of every clip goes into a multi-index hash table
   (``hash_index``), with its mirror image's hash. The frames of the clips to compare
   (a new or changed unit; all of them in a first run) look up the frames within
   ``max_frame_distance`` bits there, of clips of *other* sources.
2. Each clip pair that shares such a frame is aligned at the time lag of that frame
   pair and the lags next to it (sampling may fall half a step apart): per lag the mean
   Hamming distance over the frames both clips have there (informative ones only). The
   best lag with at least ``min_overlap_s`` of common time gives ``offset_s`` and
   ``similarity = 1 - mean distance / 32`` (1: the same hashes; 0: as far apart as
   unrelated frames are on average), clipped to [0, 1]. A pair is kept when the
   similarity is at least ``min_similarity``. A mirrored copy is aligned with the
   mirror hashes (``mirrored = True``).

``offset_s``: clip_b at time t shows what clip_a shows at ``t + offset_s`` (a re-upload
that starts 1.2 s later than its original, cut into 3-s clips, gives pairs with
offsets 1.2 and -1.8 s). Pairs are ordered ``clip_a < clip_b`` (by source, then clip).

Incremental: the signatures, pairs and the file states (size, mtime) of the last run
are kept in ``cache_dir``. A run compares only the clips of new or changed signature
files, against the index of all clips; pairs among unchanged files are taken from the
cache. The result equals a fresh run's: the lookups are symmetric (frame and mirror
hashes on both sides), so a pair's frame pairs, and with them its lags, are found the
same whichever clip looks up. Changed settings (or a missing or unreadable cache)
compare everything again.

Reference signature files (e.g. public test sets, made with ``microg4m
reference-signatures``) join the index; their matches with dataset clips go to the
contamination table, never to the pairs.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from microg4m.common import faults
from microg4m.common.atomic import atomic_path, write_text, write_tsv
from microg4m.engines.hash_index import HashIndex, popcount
from microg4m.formats.signatures import read_signatures
from microg4m.formats.duplicates import CONTAMINATION_COLUMNS, PAIR_COLUMNS

log = logging.getLogger(__name__)

CACHE_VERSION = 2
ALIGN_BATCH = 4_000_000  # frame pairs aligned per pass (bounds memory)


# ---------------------------------------------------------------- the catalogue of all clips


SAMPLE_COLUMNS = ["t_s", "hash", "mirror", "informative"]
CLIP_COLUMNS = ["clip_id", "source_id", "reference", "unit", "start", "n"]


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``start .. start + length - 1`` of each range, one after the other."""
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.repeat(np.asarray(starts, dtype=np.int64) - (np.cumsum(lengths) - lengths), lengths)
    return offsets + np.arange(int(lengths.sum()))


def split_table(table: pd.DataFrame, reference: bool, unit: str,
                step_s: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A signature table as (clips: CLIP_COLUMNS, samples: SAMPLE_COLUMNS): the ids once
    per clip, the samples clip after clip (strings per sample would fill the memory).
    With ``step_s``, a table sampled at another step is a ValueError."""
    t = table.sort_values(["clip_id", "t_s"], kind="stable").reset_index(drop=True)
    first = ~t["clip_id"].duplicated()
    starts = np.flatnonzero(first.to_numpy())
    if step_s is not None and len(t):
        steps = set(np.round(2 * t["t_s"].to_numpy(float)[starts], 6))  # samples at (k + 0.5) * step
        if steps != {round(float(step_s), 6)}:
            raise ValueError(f"sampled every {', '.join(f'{x:g}' for x in sorted(steps))} s, not every {step_s:g} s "
                             "(duplicates.signature.step_s): make it again with that step")
    clips = t.loc[first, ["clip_id", "source_id"]].reset_index(drop=True)
    clips = clips.assign(reference=reference, unit=unit, start=starts, n=np.diff(np.append(starts, len(t))))
    return clips[CLIP_COLUMNS], t[SAMPLE_COLUMNS]


class Catalog:
    """All sampled frames, clip after clip in a canonical order (dataset clips, then
    reference clips; by source, clip, time), with per-clip start, length and source."""

    def __init__(self, parts: list[tuple[pd.DataFrame, pd.DataFrame]], step_s: float) -> None:
        clips, samples, offset = [], [], 0
        for c, smp in parts:
            clips.append(c.assign(start=c["start"].to_numpy() + offset))
            samples.append(smp)
            offset += len(smp)
        empty = split_table(pd.DataFrame(columns=["clip_id", "source_id", *SAMPLE_COLUMNS]), False, "")
        c = pd.concat(clips, ignore_index=True) if clips else empty[0]
        smp = pd.concat(samples, ignore_index=True) if samples else empty[1]
        c = c.sort_values(["reference", "source_id", "clip_id"], kind="stable").reset_index(drop=True)
        take = _ranges(c["start"].to_numpy(), c["n"].to_numpy())
        self.hash = smp["hash"].to_numpy(np.int64)[take]
        self.mirror = smp["mirror"].to_numpy(np.int64)[take]
        self.informative = smp["informative"].to_numpy(bool)[take]
        t_s = smp["t_s"].to_numpy(float)[take]
        n = c["n"].to_numpy(np.int64)
        c["start"] = np.cumsum(n) - n
        self.clips = c
        self.clip_of = np.repeat(np.arange(len(c)), n)
        source_key = c["reference"].astype(str) + "\x00" + c["source_id"]
        self.source_code = pd.factorize(source_key)[0]
        self.step = float(step_s)
        self.t_s = t_s

    def samples(self) -> pd.DataFrame:
        return pd.DataFrame({"t_s": self.t_s, "hash": self.hash, "mirror": self.mirror,
                             "informative": self.informative})


# ---------------------------------------------------------------- matching


def _frames(cat: Catalog, positions: np.ndarray, mirror: bool) -> pd.DataFrame:
    """``clip, k, mir, hash`` of the frames at ``positions`` (and of their mirrors), each
    distinct hash once per clip, at its first sample k (a still shot repeats one hash)."""
    k = positions - cat.clips["start"].to_numpy()[cat.clip_of[positions]]
    parts = [pd.DataFrame({"clip": cat.clip_of[positions], "k": k, "mir": 0, "hash": cat.hash[positions]})]
    if mirror:
        parts.append(pd.DataFrame({"clip": cat.clip_of[positions], "k": k, "mir": 1, "hash": cat.mirror[positions]}))
    frames = pd.concat(parts, ignore_index=True)
    return frames.drop_duplicates(["clip", "mir", "hash"]).reset_index(drop=True)


def candidate_pairs(cat: Catalog, query_clips: np.ndarray, *, radius: int, mirror: bool,
                    chunks: int, flips: int) -> pd.DataFrame:
    """Candidate alignments ``a, b, mirrored, lag`` (clips a < b in catalogue order, of
    different sources): a frame pair within ``radius`` bits found in the index, at lag
    ``k_a - k_b``, and the lags next to it (the copy may be sampled half a step apart).

    One clip of each pair is among ``query_clips``. The index holds every informative
    frame and its mirror; the queries are the frames of ``query_clips`` and their mirrors
    (a mirror against a mirror repeats frame against frame and is skipped). The lookup
    is symmetric, so a pair and its lags are found the same whichever clip is the query.
    """
    inf = np.flatnonzero(cat.informative)
    entries = _frames(cat, inf, mirror)
    queries = _frames(cat, inf[np.isin(cat.clip_of[inf], query_clips)], mirror)
    qi, ei, _ = HashIndex(entries["hash"].to_numpy(), chunks, flips).search(
        queries["hash"].to_numpy(), radius, query_groups=cat.source_code[queries["clip"].to_numpy()],
        entry_groups=cat.source_code[entries["clip"].to_numpy()])
    q_mir, e_mir = queries["mir"].to_numpy()[qi], entries["mir"].to_numpy()[ei]
    cq, ce = queries["clip"].to_numpy()[qi], entries["clip"].to_numpy()[ei]
    kq, ke = queries["k"].to_numpy()[qi], entries["k"].to_numpy()[ei]
    reference = cat.clips["reference"].to_numpy()
    keep = (q_mir + e_mir < 2) & (cat.source_code[cq] != cat.source_code[ce]) & ~(reference[cq] & reference[ce])
    q_first = cq < ce
    a, b = np.where(q_first, cq, ce)[keep], np.where(q_first, ce, cq)[keep]
    lag = np.where(q_first, kq - ke, ke - kq)[keep]
    mirrored = (q_mir ^ e_mir)[keep].astype(bool)
    cands = pd.DataFrame({"a": np.repeat(a, 3), "b": np.repeat(b, 3), "mirrored": np.repeat(mirrored, 3),
                          "lag": (np.repeat(lag, 3) + np.tile([-1, 0, 1], len(lag)))})
    return cands.drop_duplicates().sort_values(["a", "b", "mirrored", "lag"]).reset_index(drop=True)


def align(cat: Catalog, cands: pd.DataFrame, *, min_overlap_s: float) -> pd.DataFrame:
    """Best lag of each clip pair: ``a, b, mirrored, lag, n, mean_d``.

    For each candidate (a, b, mirrored, lag), frame k of a is compared with frame
    k - lag of b (with b's mirror hashes when mirrored) wherever both are informative:
    ``n`` frames, mean Hamming distance ``mean_d``. Lags with fewer than
    ``min_overlap_s`` of such common time are left out; of the rest, per (a, b,
    mirrored), the smallest mean distance wins (ties: the smallest |lag|, then the
    smaller lag).
    """
    cols = ["a", "b", "mirrored", "lag", "n", "mean_d"]
    if cands.empty:
        return pd.DataFrame(columns=cols)
    start = cat.clips["start"].to_numpy()
    length = cat.clips["n"].to_numpy()
    min_n = max(1, int(np.ceil(min_overlap_s / cat.step - 1e-9)))
    a_all, b_all, lag_all = (cands[c].to_numpy(np.int64) for c in ("a", "b", "lag"))
    first = np.maximum(0, lag_all)  # first frame of a that b (shifted by lag) covers
    count = np.clip(np.minimum(length[a_all], length[b_all] + lag_all) - first, 0, None)
    out = []
    for lo, hi in _batches(count, ALIGN_BATCH):
        a, b, lag, m = a_all[lo:hi], b_all[lo:hi], lag_all[lo:hi], cands["mirrored"].to_numpy()[lo:hi]
        n_cells = count[lo:hi]
        row = np.repeat(np.arange(hi - lo), n_cells)
        ka = _ranges(first[lo:hi], n_cells)
        ia, ib = start[a][row] + ka, start[b][row] + ka - lag[row]
        hb = np.where(m[row], cat.mirror[ib], cat.hash[ib])
        both = cat.informative[ia] & cat.informative[ib]
        d = popcount(cat.hash[ia] ^ hb).astype(np.int64)
        n = np.bincount(row, weights=both, minlength=hi - lo)
        dsum = np.bincount(row, weights=d * both, minlength=hi - lo)
        ok = n >= min_n
        out.append(pd.DataFrame({"a": a[ok], "b": b[ok], "mirrored": m[ok], "lag": lag[ok],
                                 "n": n[ok].astype(int), "mean_d": dsum[ok] / n[ok]}))
    res = pd.concat(out, ignore_index=True)
    if res.empty:
        return pd.DataFrame(columns=cols)
    res["abs_lag"] = res["lag"].abs()
    best = res.sort_values(["a", "b", "mirrored", "mean_d", "abs_lag", "lag"], kind="stable")
    return best.drop_duplicates(["a", "b", "mirrored"])[cols].reset_index(drop=True)


def _batches(sizes: np.ndarray, limit: int):
    """Consecutive (lo, hi) slices whose sizes add up to about ``limit`` (at least one item)."""
    lo, total = 0, 0
    for i, size in enumerate(sizes):
        if total and total + size > limit:
            yield lo, i
            lo, total = i, 0
        total += int(size)
    if lo < len(sizes):
        yield lo, len(sizes)


def match(cat: Catalog, query_clips: np.ndarray, *, max_frame_distance: int = 12, min_similarity: float = 0.5,
          min_overlap_s: float = 1.0, mirror: bool = True, chunks: int = 3, flips: int = 1) -> pd.DataFrame:
    """Pairs (PAIR_COLUMNS plus ``reference_a/b``) with one clip among ``query_clips``."""
    cands = candidate_pairs(cat, query_clips, radius=max_frame_distance, mirror=mirror, chunks=chunks, flips=flips)
    al = align(cat, cands, min_overlap_s=min_overlap_s)
    if al.empty:
        return _pairs_frame(cat, al)
    al["similarity"] = np.clip(1 - al["mean_d"].astype(float) / 32, 0, 1)
    al = al[al["similarity"] >= min_similarity - 1e-12]
    # one row per clip pair: the better of plain and mirrored (ties: plain)
    al = al.sort_values(["a", "b", "similarity", "mirrored"], ascending=[True, True, False, True], kind="stable")
    return _pairs_frame(cat, al.drop_duplicates(["a", "b"]))


def _pairs_frame(cat: Catalog, al: pd.DataFrame) -> pd.DataFrame:
    clips = cat.clips
    a, b = al["a"].to_numpy(int), al["b"].to_numpy(int)
    return pd.DataFrame({
        "clip_a": clips["clip_id"].to_numpy()[a], "clip_b": clips["clip_id"].to_numpy()[b],
        "source_a": clips["source_id"].to_numpy()[a], "source_b": clips["source_id"].to_numpy()[b],
        "similarity": np.round(al["similarity"].to_numpy(float) if "similarity" in al else [], 3),
        "offset_s": np.round(al["lag"].to_numpy(float) * cat.step, 3),
        "mirrored": al["mirrored"].to_numpy(bool),
        "overlap_s": np.round(al["n"].to_numpy(float) * cat.step, 3),
        "reference_a": clips["reference"].to_numpy(bool)[a], "reference_b": clips["reference"].to_numpy(bool)[b],
    })


# ---------------------------------------------------------------- the stage, with its cache


def _stat(path: str | os.PathLike) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def _load_cache(cache_dir: Path, settings: dict):
    """(file states, clips, samples, pairs) of the last run, or None."""
    try:
        state = json.loads((cache_dir / "state.json").read_text(encoding="utf-8"))
        if state.get("version") != CACHE_VERSION or state.get("settings") != settings:
            return None
        clips = pd.read_parquet(cache_dir / "clips.parquet")
        samples = pd.read_parquet(cache_dir / "samples.parquet")
        pairs = pd.read_parquet(cache_dir / "pairs.parquet")
        return state["files"], clips, samples, pairs
    except (OSError, ValueError, KeyError) as exc:
        if (cache_dir / "state.json").exists():
            log.warning("duplicates: cache %s unusable (%s); comparing everything", cache_dir, exc)
        return None


def _save_cache(cache_dir: Path, settings: dict, files: dict, cat: Catalog, pairs: pd.DataFrame) -> None:
    (cache_dir / "state.json").unlink(missing_ok=True)  # no state = no cache, until all is written
    for name, df in (("clips", cat.clips[CLIP_COLUMNS]), ("samples", cat.samples()), ("pairs", pairs)):
        with atomic_path(cache_dir / f"{name}.parquet", suffix=".tmp.parquet") as tmp:
            df.to_parquet(tmp, index=False)
    write_text(cache_dir / "state.json", json.dumps({"version": CACHE_VERSION, "settings": settings,
                                                     "files": files}, indent=1, sort_keys=True))


def run(signatures: Sequence[str | os.PathLike], out: str | os.PathLike, *, cache_dir: str | os.PathLike,
        references: Iterable[str | os.PathLike] = (), contamination: str | os.PathLike | None = None,
        step_s: float = 0.1, max_frame_distance: int = 12, min_similarity: float = 0.5,
        min_overlap_s: float = 1.0, mirror: bool = True, chunks: int = 3, flips: int = 1) -> dict:
    """Write the pairs table ``out`` (and ``contamination``); return counts.

    ``step_s``: the signatures' sampling step (duplicates.signature.step_s); a table
    sampled at another step is named in the log and left out."""
    match_settings = dict(max_frame_distance=max_frame_distance, min_similarity=min_similarity,
                          min_overlap_s=min_overlap_s, mirror=mirror, chunks=chunks, flips=flips)
    settings = {**match_settings, "step_s": step_s}
    cache_dir = Path(cache_dir)
    wanted = {str(p): False for p in signatures} | {str(p): True for p in references}
    files = {p: _stat(p) for p in wanted if Path(p).is_file()}
    for p in sorted(set(wanted) - set(files)):
        log.error("duplicates: %s: no such signature file; left out", p)

    cached = _load_cache(cache_dir, settings)
    old_files, old_clips, old_samples, pairs = cached if cached else ({}, None, None, None)
    same = {p for p in files if old_files.get(p) == files[p]}
    fresh = sorted(set(files) - same)
    parts = []
    if same:
        keep = old_clips[old_clips["unit"].isin(same)].reset_index(drop=True)
        take = _ranges(keep["start"].to_numpy(), keep["n"].to_numpy())
        parts.append((keep.assign(start=np.cumsum(keep["n"]) - keep["n"]), old_samples.iloc[take]))
    for p in fresh:
        try:
            parts.append(split_table(read_signatures(p), wanted[p], p, step_s))
        except (OSError, ValueError) as exc:
            faults.check(exc, p)  # no space, EIO, EACCES ...: the job fails, never a bad input
            log.error("duplicates: %s: unreadable signature table (%s); left out", p, exc)
            files.pop(p)
    cat = Catalog(parts, step_s)
    query = np.flatnonzero(cat.clips["unit"].isin(fresh).to_numpy())
    new_pairs = match(cat, query, **match_settings)
    if same:
        key = cat.clips["clip_id"] + "\x00" + cat.clips["reference"].astype(str)
        unit_of = dict(zip(key, cat.clips["unit"]))
        ua = (pairs["clip_a"] + "\x00" + pairs["reference_a"].astype(str)).map(unit_of)
        ub = (pairs["clip_b"] + "\x00" + pairs["reference_b"].astype(str)).map(unit_of)
        old = pairs[ua.isin(same) & ub.isin(same)]
        new_pairs = pd.concat([old, new_pairs], ignore_index=True)
    new_pairs = new_pairs.sort_values(["reference_a", "reference_b", "source_a", "source_b", "clip_a", "clip_b"],
                                      kind="stable").reset_index(drop=True)
    dataset = new_pairs[~new_pairs["reference_a"] & ~new_pairs["reference_b"]]
    write_tsv(out, dataset[PAIR_COLUMNS])
    contam = new_pairs[new_pairs["reference_b"] & ~new_pairs["reference_a"]]
    if contamination is not None:
        write_tsv(contamination, pd.DataFrame({
            "clip_id": contam["clip_a"], "source_id": contam["source_a"], "reference_clip": contam["clip_b"],
            "reference_set": contam["source_b"], "similarity": contam["similarity"], "offset_s": contam["offset_s"],
            "mirrored": contam["mirrored"], "overlap_s": contam["overlap_s"]})[CONTAMINATION_COLUMNS])
    _save_cache(cache_dir, settings, files, cat, new_pairs)
    summary = {"clips": int(len(cat.clips)), "compared": int(len(query)), "pairs": int(len(dataset)),
               "contaminated": int(len(contam)), "files_new_or_changed": len(fresh)}
    log.info("duplicates: %s", summary)
    return summary


