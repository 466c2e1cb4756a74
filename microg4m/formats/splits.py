"""Train / val / test splits by clip (the reference) or by source.

Recipe (the reference's, see docs/formats.md): the units (clips, or sources with all their
clips) are shuffled with ``random.Random(seed)``; a greedy pass then puts into train,
for each action not yet covered (rarest first), the first unit in that order that has
it, so that train covers every action present; the remaining units, in the same
shuffled order, fill train, then val, then test. The targets are cut over the whole
clip count N as the reference did: ``train = floor(N * 0.7)``, ``val = floor(N * 0.1)``,
``test = the rest`` (4,759 clips -> 3,331 / 475 / 953). If the greedy pass alone needs
more clips than the train target, train is larger and val/test take what is left.

Without labels every action set is empty and the greedy pass does nothing.

Stable assignment (a release after a previous one, ``fixed``): the clips assigned before
keep their split, whatever else changed; a unit (source, near-duplicate component) with
such clips puts its other clips where most of them are (ties: train, val, test); the
greedy pass covers only the actions train does not have yet; the targets are still cut
over all clips, so the new units fill what train, val and test lack, in the same
shuffled order. With nothing fixed it is the recipe above, split for split.
"""

from __future__ import annotations

import math
import os
import random
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Mapping

from microg4m.common import faults
from microg4m.common.atomic import write_text

SPLITS = ("train", "val", "test")


def targets(n: int, ratios=(0.7, 0.1, 0.2)) -> tuple[int, int, int]:
    """Clip counts per split: floor for train and val, the rest for test (exact fractions)."""
    if len(ratios) != 3 or any(float(r) < 0 for r in ratios) or sum(float(r) for r in ratios) <= 0:
        raise ValueError(f"split ratios must be three non-negative numbers with a positive sum, got {list(ratios)}")
    fr = [Fraction(str(r)) for r in ratios]
    total = sum(fr)
    n_train = math.floor(n * fr[0] / total)
    n_val = math.floor(n * fr[1] / total)
    return n_train, n_val, n - n_train - n_val


def assign(
    clip_actions: Mapping[str, Iterable[int]],
    *,
    groups: Mapping[str, str] | None = None,
    seed: int = 42,
    ratios=(0.7, 0.1, 0.2),
    fixed: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Map every clip to ``train``/``val``/``test``.

    ``clip_actions``: clip id -> the action ids labelled in it (may be empty).
    ``groups``: clip id -> group (e.g. source id); all clips of a group share a split.
    Default: each clip is its own group.
    ``fixed``: clip id -> split of clips assigned before (a previous release): they keep
    it, and the rest is assigned around them (the module docstring); ids that are not in
    ``clip_actions`` are ignored.
    """
    clips = sorted(clip_actions)
    group_of = {c: (groups[c] if groups is not None else c) for c in clips}
    fixed = {c: s for c, s in (fixed or {}).items() if c in group_of}
    bad = sorted({s for s in fixed.values() if s not in SPLITS})
    if bad:
        raise ValueError(f"fixed splits must be {', '.join(SPLITS)}, got {', '.join(map(repr, bad))}")
    members: dict[str, list[str]] = defaultdict(list)
    acts: dict[str, set[int]] = defaultdict(set)
    for c in clips:
        members[group_of[c]].append(c)
        acts[group_of[c]].update(int(a) for a in clip_actions[c])
    order = sorted(members)
    random.Random(seed).shuffle(order)

    n_train, n_val, _ = targets(len(clips), ratios)
    split_of: dict[str, str] = {}  # group -> the split of its clips that are not fixed
    for g, splits_there in held_groups(fixed, group_of).items():
        split_of[g] = max(SPLITS, key=lambda s: (len(splits_there.get(s, ())), -SPLITS.index(s)))
    covered: set[int] = set()
    for c, s in fixed.items():
        if s == "train":
            covered.update(int(a) for a in clip_actions[c])
    for g, s in split_of.items():
        if s == "train":
            covered |= {int(a) for c in members[g] if c not in fixed for a in clip_actions[c]}
    units_with: dict[int, int] = defaultdict(int)
    for g in order:
        for a in acts[g]:
            units_with[a] += 1
    for a in sorted(units_with, key=lambda a: (units_with[a], a)):  # rarest first
        if a in covered:
            continue
        g = next((g for g in order if a in acts[g] and g not in split_of), None)
        if g is None:  # only in units held in val or test by fixed clips
            continue
        split_of[g] = "train"
        covered |= acts[g]

    count = {s: 0 for s in SPLITS}
    for c in clips:
        g = group_of[c]
        if c in fixed or g in split_of:
            count[fixed.get(c) or split_of[g]] += 1
    for g in order:
        if g in split_of:
            continue
        s = "train" if count["train"] < n_train else "val" if count["val"] < n_val else "test"
        split_of[g] = s
        count[s] += len(members[g])
    return {c: fixed.get(c) or split_of[group_of[c]] for c in clips}


def held_groups(fixed: Mapping[str, str], group_of: Mapping[str, str]) -> dict[str, dict[str, list[str]]]:
    """Group -> split -> its fixed clips (sorted), for the groups that have fixed clips; a
    group with fixed clips in two splits (sources linked by a duplicate found since) keeps
    them there."""
    out: dict[str, dict[str, list[str]]] = {}
    for c in sorted(fixed):
        if c in group_of:
            out.setdefault(group_of[c], {}).setdefault(fixed[c], []).append(c)
    return out


def clips_by_split(assignment: Mapping[str, str]) -> dict[str, list[str]]:
    """Split -> sorted clip ids."""
    out: dict[str, list[str]] = {s: [] for s in SPLITS}
    for clip in sorted(assignment):
        out[assignment[clip]].append(clip)
    return out


def write_split_ids(out_dir: str | os.PathLike, assignment: Mapping[str, str]) -> None:
    """``{train,val,test}_video_ids.txt``: one clip id per line, sorted."""
    for split, ids in clips_by_split(assignment).items():
        write_text(Path(out_dir) / f"{split}_video_ids.txt", "".join(f"{c}\n" for c in ids))


def read_split_ids(out_dir: str | os.PathLike) -> dict[str, str]:
    """The assignment that :func:`write_split_ids` wrote (clip id -> split); ValueError when a
    file is missing or a clip is in two splits, naming it."""
    out: dict[str, str] = {}
    for split in SPLITS:
        path = Path(out_dir) / f"{split}_video_ids.txt"
        try:
            ids = path.read_text(encoding="utf-8").split()
        except OSError as exc:
            faults.check(exc, path)  # no space, EIO, EACCES ...: the job fails, never a bad input
            raise ValueError(f"{path}: cannot read the split's clip ids ({exc})") from None
        for c in ids:
            if c in out:
                raise ValueError(f"{path}: {c} is also in the {out[c]} split")
            out[c] = split
    return out
