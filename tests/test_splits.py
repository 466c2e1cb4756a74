"""Split properties over generated datasets (pure logic)."""

from __future__ import annotations

import random

import pytest

from microg4m.formats import splits


def generated(seed: int):
    """A random dataset: clips of a few sources, each with 0-3 actions (Zipf-like)."""
    rng = random.Random(seed)
    n_sources = rng.randint(2, 12)
    actions = rng.sample(range(1, 81), rng.randint(1, 12))
    weights = [1 / (i + 1) for i in range(len(actions))]
    clip_actions, groups = {}, {}
    for s in range(n_sources):
        for k in range(rng.randint(1, 25)):
            clip = f"src{s:02d}_{k:03d}"
            clip_actions[clip] = set(rng.choices(actions, weights, k=rng.randint(0, 3)))
            groups[clip] = f"src{s:02d}"
    return clip_actions, groups


def check_common(assignment, clip_actions):
    assert set(assignment) == set(clip_actions)  # covers all clips
    assert set(assignment.values()) <= set(splits.SPLITS)  # one split each: disjoint
    by = splits.clips_by_split(assignment)
    assert sum(map(len, by.values())) == len(clip_actions)
    present = set().union(*clip_actions.values())
    in_train = set().union(*(clip_actions[c] for c in by["train"]))
    assert present <= in_train, f"actions missing from train: {present - in_train}"
    return by


@pytest.mark.parametrize("seed", range(40))
def test_clip_splits_properties(seed):
    clip_actions, _ = generated(seed)
    n = len(clip_actions)
    a = splits.assign(clip_actions, seed=42)
    by = check_common(a, clip_actions)
    n_train, n_val, n_test = splits.targets(n)
    greedy_max = len(set().union(*clip_actions.values()))
    if greedy_max <= n_train:  # the greedy pass fits into the train target
        assert [len(by[s]) for s in splits.SPLITS] == [n_train, n_val, n_test]
        assert abs(len(by["train"]) - 0.7 * n) < 1 and abs(len(by["val"]) - 0.1 * n) < 1
        assert abs(len(by["test"]) - 0.2 * n) < 2  # test takes the rest of the two floors
    assert a == splits.assign(dict(reversed(list(clip_actions.items()))), seed=42)  # order-free


@pytest.mark.parametrize("seed", range(25))
def test_source_splits_keep_sources_together(seed):
    clip_actions, groups = generated(seed)
    a = splits.assign(clip_actions, groups=groups, seed=42)
    check_common(a, clip_actions)
    per_source = {}
    for clip, split in a.items():
        per_source.setdefault(groups[clip], set()).add(split)
    assert all(len(s) == 1 for s in per_source.values()), per_source


def test_reference_sizes():
    assert splits.targets(4759) == (3331, 475, 953)  # the released 3,331 / 475 / 953 clips
    assert splits.targets(10) == (7, 1, 2)
    assert splits.targets(100, (7, 1, 2)) == (70, 10, 20)


def test_seed_changes_the_split_and_is_reproducible():
    clip_actions = {f"c_{i:03d}": set() for i in range(50)}
    assert splits.assign(clip_actions, seed=42) == splits.assign(clip_actions, seed=42)
    assert splits.assign(clip_actions, seed=42) != splits.assign(clip_actions, seed=7)


def test_rare_action_goes_to_train():
    clip_actions = {f"c_{i:03d}": {12} for i in range(30)}
    clip_actions["c_999"] = {72}  # the only clip with action 72
    for seed in range(10):
        assert splits.assign(clip_actions, seed=seed)["c_999"] == "train"


def test_greedy_overflow_keeps_cover():
    clip_actions = {f"c_{i}": {i + 1} for i in range(5)}  # every clip has its own action
    assert set(splits.assign(clip_actions).values()) == {"train"}


def test_bad_ratios():
    with pytest.raises(ValueError, match="ratios"):
        splits.targets(10, (0.7, 0.3))
