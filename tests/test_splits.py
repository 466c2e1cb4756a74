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


# ---------------------------------------------------------------- stable assignment (a release after another)


def test_nothing_fixed_is_the_recipe_split_for_split():
    for seed in range(10):
        clip_actions, groups = generated(seed)
        assert splits.assign(clip_actions, groups=groups, fixed={}) == splits.assign(clip_actions, groups=groups)
        assert splits.assign(clip_actions, fixed=None) == splits.assign(clip_actions)


@pytest.mark.parametrize("seed", range(20))
def test_a_withdrawn_source_moves_no_other_clip(seed):
    clip_actions, groups = generated(seed)
    before = splits.assign(clip_actions, groups=groups)
    gone = sorted(set(groups.values()))[seed % len(set(groups.values()))]
    left = {c: a for c, a in clip_actions.items() if groups[c] != gone}
    after = splits.assign(left, groups=groups, fixed=before)
    assert after == {c: before[c] for c in left}


@pytest.mark.parametrize("seed", range(20))
def test_new_clips_are_assigned_around_the_old_ones(seed):
    clip_actions, groups = generated(seed)
    rng = random.Random(seed)
    sources = sorted(set(groups.values()))
    old_sources = set(rng.sample(sources, max(1, len(sources) // 2)))
    # the first release: the old sources, and the first half of each old source's clips
    first = {c: a for c, a in clip_actions.items() if groups[c] in old_sources and int(c[-3:]) % 2 == 0}
    before = splits.assign(first, groups=groups)
    after = splits.assign(clip_actions, groups=groups, fixed=before)
    assert {c: after[c] for c in before} == before  # no old clip moves
    assert set(after) == set(clip_actions)
    per_source = {}
    for clip, split in after.items():
        per_source.setdefault(groups[clip], set()).add(split)
    assert all(len(s) == 1 for s in per_source.values()), per_source  # still grouped by source
    # every action that train could still get is in train
    in_train = set().union(*(clip_actions[c] for c in after if after[c] == "train"))
    reachable = set().union(*(clip_actions[c] for c in clip_actions if groups[c] not in old_sources),
                            *(clip_actions[c] for c in before if before[c] == "train"))
    assert reachable <= in_train


def test_new_units_fill_what_each_split_lacks():
    clip_actions = {f"s{i:02d}_000": set() for i in range(20)}
    before = {c: "train" for c in sorted(clip_actions)[:10]}  # a first release of 10 clips, all train
    after = splits.assign(clip_actions, fixed=before)
    by = splits.clips_by_split(after)
    assert [len(by[s]) for s in splits.SPLITS] == list(splits.targets(20))  # 14 / 2 / 4 over all clips
    assert all(after[c] == "train" for c in before)


def test_a_unit_held_in_two_splits_keeps_its_old_clips_and_takes_the_majority():
    clip_actions = {"a_000": {1}, "a_001": set(), "b_000": set(), "b_001": set(), "a_002": set(), "b_002": set()}
    linked = {c: "ab" for c in clip_actions}  # a and b found to be near-duplicates since
    before = {"a_000": "train", "a_001": "train", "b_000": "test"}
    after = splits.assign(clip_actions, groups=linked, fixed=before)
    assert {c: after[c] for c in before} == before
    assert after["a_002"] == after["b_001"] == after["b_002"] == "train"
    assert splits.held_groups(before, linked) == {"ab": {"train": ["a_000", "a_001"], "test": ["b_000"]}}


def test_an_action_held_only_in_val_or_test_does_not_stop_the_assignment():
    clip_actions = {"a_000": {7}, "b_000": {3}, "c_000": set()}
    after = splits.assign(clip_actions, fixed={"a_000": "test"})
    assert after["a_000"] == "test" and after["b_000"] == "train"
    with pytest.raises(ValueError, match="fixed splits must be"):
        splits.assign(clip_actions, fixed={"a_000": "dev"})


def test_split_ids_read_back(tmp_path):
    assignment = {"a_000": "train", "a_001": "test", "b_000": "val"}
    splits.write_split_ids(tmp_path, assignment)
    assert splits.read_split_ids(tmp_path) == assignment
    (tmp_path / "val_video_ids.txt").write_text("a_000\n")
    with pytest.raises(ValueError, match="a_000 is also in the train split"):
        splits.read_split_ids(tmp_path)
