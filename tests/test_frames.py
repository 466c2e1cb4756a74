"""JPEG frames with real ffmpeg, and the frame lists."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pandas as pd
import pytest

from microg4m.stages import frames
from microg4m.formats import manifest
from microg4m.common import media

from conftest import get_footage, make_clip
from microg4m.formats.frame_lists import write_frame_lists


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """clips/src/: A kept, B filtered out, C kept but missing, D kept but not a video."""
    root = tmp_path_factory.mktemp("frames")
    src = root / "clips" / "src"
    make_clip(get_footage("carphone"), src / "src_000.mp4")
    (src / "src_003.mp4").write_bytes(b"not a video at all")
    rows = [
        dict(
            clip_id=f"src_{i:03d}",
            source_id="src",
            clip_type="r",
            seq=i,
            start_s=3 * i,
            frames=90,
            width=176,
            height=144,
            status="ok",
            reason="",
        )
        for i in range(4)
    ]
    manifest.write_manifest(src / "manifest.tsv", rows)
    pd.DataFrame(
        {
            "clip_id": [r["clip_id"] for r in rows],
            "person_share": 1.0,
            "cuts": "",
            "keep": [1, 0, 1, 1],
            "reason": ["kept", "scene_cut", "kept", "kept"],
        }
    ).to_csv(root / "filter.tsv", sep="\t", index=False)
    out = root / "frames"
    done = frames.run(src / "manifest.tsv", root / "filter.tsv", out, jpeg_quality=2)
    return root, src, out, done


def test_frames_written_one_based_and_complete(source):
    root, src, out, done = source
    files = sorted(p.name for p in (out / "src_000").iterdir() if not p.is_symlink())
    assert files == [f"src_000_{n:06d}.jpg" for n in range(1, 91)]
    # mmaction2's names: relative links to the same JPEGs, no second copy
    links = {p.name: os.readlink(p) for p in (out / "src_000").iterdir() if p.is_symlink()}
    assert links == {f"img_{n:05d}.jpg": f"src_000_{n:06d}.jpg" for n in range(1, 91)}
    assert not (out / "src_001").exists()  # filtered out
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no temp folders left
    img = cv2.imread(str(out / "src_000" / "src_000_000001.jpg"))
    assert img.shape == (144, 176, 3)


def test_done_list_records_failures_and_goes_on(source):
    root, src, out, done = source
    on_disk = pd.read_csv(out / "src.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert on_disk.columns.tolist() == frames.DONE_COLUMNS
    assert on_disk["clip_id"].tolist() == ["src_000", "src_002", "src_003"]
    assert on_disk["frames"].tolist() == ["90", "0", "0"]
    assert on_disk["status"].tolist() == ["ok", "failed", "failed"]
    assert "src_002.mp4: no such file" in on_disk.loc[1, "reason"]
    assert "src_003.mp4" in on_disk.loc[2, "reason"] and "ffmpeg failed" in on_disk.loc[2, "reason"]
    assert not (out / "src_002").exists() and not (out / "src_003").exists()


def test_jpeg_n_is_decoded_frame_n(source):
    """Frame n (1-based) of the JPEGs is the n-th decoded frame of the clip."""
    root, src, out, done = source
    decoded = [f.astype(np.float32) for f in media.read_frames(src / "src_000.mp4")]
    assert len(decoded) == 90
    for n in (1, 2, 45, 89, 90):
        jpg = cv2.imread(str(out / "src_000" / f"src_000_{n:06d}.jpg")).astype(np.float32)
        diffs = [float(np.abs(jpg - d).mean()) for d in decoded]
        assert diffs[n - 1] == min(diffs), (n, int(np.argmin(diffs)) + 1)
        assert diffs[n - 1] < 3.0


def test_rerun_is_byte_identical(source, tmp_path):
    root, src, out, done = source
    before = {p.name: p.read_bytes() for p in (out / "src_000").iterdir()}
    frames.run(src / "manifest.tsv", root / "filter.tsv", out, tmp_path / "done.tsv")  # as the rule calls it
    after = {p.name: p.read_bytes() for p in (out / "src_000").iterdir()}
    assert before == after
    # the same done list, but for where it lies: each clip's path is relative to it
    a, b = (pd.read_csv(f, sep="\t", dtype=str, keep_default_na=False) for f in (tmp_path / "done.tsv", out / "src.tsv"))
    assert a.drop(columns="path").equals(b.drop(columns="path"))
    assert [(tmp_path / x).resolve() for x in a.path] == [(out / x).resolve() for x in b.path]
    assert list(b.path) == list(b.clip_id)  # beside the done list: the clip's own folder


def test_frame_lists_as_released(tmp_path):
    write_frame_lists(
        tmp_path, {"train": ["-Y04Zic1-r4_074"], "val": [], "test": ["b_001"]}, {"-Y04Zic1-r4_074": 90, "b_001": 3}
    )
    train = (tmp_path / "train.csv").read_text().splitlines()
    assert train[0] == "original_video_id video_id frame_id path labels"
    assert train[1] == '-Y04Zic1-r4_074 -Y04Zic1-r4_074 1 -Y04Zic1-r4_074/-Y04Zic1-r4_074_000001.jpg ""'
    assert len(train) == 91 and train[-1].split(" ")[2] == "90"
    assert all(len(line.split(" ")) == 5 for line in train)  # PySlowFast splits on spaces
    assert (tmp_path / "val.csv").read_text() == "original_video_id video_id frame_id path labels\n"
    assert (tmp_path / "test.csv").read_text().splitlines()[3] == 'b_001 b_001 3 b_001/b_001_000003.jpg ""'


def test_unreadable_inputs_named(tmp_path):
    (tmp_path / "manifest.tsv").write_text("nonsense\n")
    (tmp_path / "filter.tsv").write_text("clip_id\tkeep\n")
    with pytest.raises(ValueError, match=r"manifest.tsv.*KeyError"):
        frames.run(tmp_path / "manifest.tsv", tmp_path / "filter.tsv", tmp_path / "out")
