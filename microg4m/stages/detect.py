"""Detect stage: YOLO boxes on every frame of every ok clip of one source.

The model runs once per frame; its raw boxes (low threshold, every class, with the
class: the reference's tracker sees all of them, so non-person tracks take ids too)
are cached in ``detections/{src}.parquet`` in the model's own order (confidence
descending, as its NMS returns them), so that filter and track never run YOLO again. Frames
are decoded on a worker thread (cv2 releases the GIL) while the model runs, and are fed
in batches that span clip boundaries; nothing grows with the number of clips except the
(small) box table, which is flushed to parquet in row groups.

The model runs with the runtime ``detect.runtime`` picks (microg4m.engines.runtime: torch, or a
cached OpenVINO / ONNX Runtime / TensorRT export) and with the threads the job is given.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from microg4m.common.progress import progress
from microg4m.formats import manifest as mf
from microg4m.engines import exact as ex
from microg4m.engines import runtime as rt
from microg4m.common.atomic import atomic_path
from microg4m.common import media
from microg4m.common.media import MediaError
from microg4m.formats.detector_record import read as read_detector
from microg4m.engines.frame_cache import FrameCache, key as cache_key
from microg4m.formats.rejection import Rejection
from microg4m.engines.weights import resolve_weights
from microg4m.engines.model import load_model, passive_openmp
from microg4m.formats.detections import COVERAGE, SCHEMA


ROW_GROUP = 65536  # boxes per parquet row group (bounds the in-memory table)
# --- device and model ----------------------------------------------------------------

def detect_frames(model, frames: list[np.ndarray], *, imgsz: int = 640, conf: float = 0.1,
                  device: str = "cpu", half: bool = False) -> list[np.ndarray]:
    """Boxes of a batch of BGR frames in one forward pass.

    Returns one float32 array (n, 6) per frame: x1, y1, x2, y2 (pixels), conf, cls; in the
    model's order (NMS: confidence descending), which is the order the reference's
    tracker receives them in.
    """
    if not frames:
        return []
    # quantize=16 is ultralytics' current spelling of half=True (half is deprecated)
    results = model.predict(frames, imgsz=imgsz, conf=conf, device=device,
                            quantize=16 if half else None, batch=len(frames), verbose=False, save=False)
    # copied: a view would keep the whole prediction tensor of its batch alive (measured:
    # ~4.7 MB per frame, 8 GB for a job of 30 clips that holds its boxes until it writes them)
    return [np.array(r.boxes.data[:, :6].float().cpu().numpy(), dtype=np.float32).reshape(-1, 6) for r in results]


class Detector:
    """YOLO with the chosen runtime and precision, called on batches of same-shape BGR frames.

    The torch model is always loaded (it checks the weights and is the source of every
    export). An exported runtime loads one model (``model``: the detector stage's, else
    exported or found in the cache folder) and, for OpenVINO, compiles it once per
    letterboxed frame shape, when that shape first comes up.
    """

    def __init__(self, weights: str, *, runtime: str = "auto", precision: str = "default", device: str = "cpu",
                 imgsz: int = 640, conf: float = 0.1, batch: int = 4, threads: int | None = None,
                 cache: str | os.PathLike | None = None, model: str | os.PathLike | None = None):
        self.device, self.imgsz, self.conf, self.batch, self.threads = device, imgsz, conf, batch, threads
        self.runtime = rt.choose_runtime(runtime, device, precision)
        self.precision = rt.choose_precision(precision, self.runtime, device)
        self.cache = Path(cache) if cache else rt.default_cache()
        self.torch_model = load_model(str(weights), device)
        self.source = self.torch_model.ckpt_path or resolve_weights(weights)  # downloaded release weights too
        # fp16 inputs for the runtimes that store FP16 weights (OpenVINO's fp16 is a compile hint)
        self.half = self.precision == "fp16" and self.runtime != "openvino"
        self.path = Path(model) if model else None
        if self.path is not None and not self.path.exists():
            raise FileNotFoundError(f"detector model {self.path} is gone (export cache removed?); "
                                    "re-run: snakemake --forcerun detector")
        if self.precision == "int8" and self.path is None:
            raise ValueError(f"{rt.PRECISION} = 'int8' needs a model quantized on the run's clips "
                             "(the workflow's detector rule, or microg4m detect --precision int8)")
        self._models: dict[tuple[int, int], object] = {}
        if self.runtime == "torch":
            rt.prepare(self.torch_model, "torch", precision=self.precision, threads=threads)

    def exported(self) -> Path:
        """The exported model this detector runs (made once, or found in the cache)."""
        if self.path is None:
            self.path = rt.exported_model(self.source, self.runtime, precision=self.precision, imgsz=self.imgsz,
                                          batch=self.batch, device=self.device, cache=self.cache)
        return self.path

    def model_for(self, frame_shape: tuple[int, ...]):
        """The model that runs frames of ``frame_shape`` (loaded and compiled on first use)."""
        if self.runtime == "torch":
            return self.torch_model
        shape = rt.letterbox_shape(frame_shape, self.imgsz)
        if shape not in self._models:
            path = self.exported()
            model = rt.load_exported(path, self.torch_model.task)
            # the first predict builds ultralytics' backend; then it gets the shape, precision and threads
            detect_frames(model, [np.zeros(frame_shape, np.uint8)], imgsz=self.imgsz, conf=self.conf,
                          device=self.device, half=self.half)
            rt.prepare(model, self.runtime, precision=self.precision, threads=self.threads, path=path, shape=shape,
                       compiled=self.cache / COMPILED, batch=self.batch)
            logging.getLogger(__name__).info(
                "detect: %s %s model %s for %sx%s frames (input %sx%s), %s threads", self.runtime, self.precision,
                path, frame_shape[1], frame_shape[0], shape[1], shape[0], rt.threads_in_use(model, self.runtime))
            self._models[shape] = model
        return self._models[shape]

    def __call__(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        """detect_frames() on one batch, with the model for the batch's frame shape."""
        if not frames:
            return []
        return detect_frames(self.model_for(frames[0].shape), frames, imgsz=self.imgsz, conf=self.conf,
                             device=self.device, half=self.half)


COMPILED = "compiled"  # the folder of OpenVINO's compiled models, in the export cache (rt.compiled_cache)


# --- streaming frames ----------------------------------------------------------------

DECODERS = ("auto", "cv2", "torchcodec")


def choose_decoder(decoder: str, device: str) -> str:
    """``auto``: torchcodec (NVDEC) on CUDA when it is installed, else OpenCV (cv2)."""
    key = str(decoder).strip().lower()
    if key not in DECODERS:
        raise ValueError(f"detect.decoder = {decoder!r}: expected one of {', '.join(DECODERS)}")
    has_torchcodec = importlib.util.find_spec("torchcodec") is not None
    if key == "auto":
        return "torchcodec" if str(device).startswith("cuda") and has_torchcodec else "cv2"
    if key == "torchcodec" and not has_torchcodec:
        raise ValueError(f"detect.decoder = {decoder!r}: torchcodec is not installed (pip install 'microg4m[gpu]')")
    return key


def decode_clip(path: Path, decoder: str = "cv2", device: str = "cpu") -> list[np.ndarray]:
    """Every frame of one clip as BGR arrays; torchcodec decodes on ``device`` (NVDEC on CUDA)."""
    if decoder == "cv2":
        return media.read_frames(path)
    from torchcodec.decoders import VideoDecoder

    dec = VideoDecoder(str(path), device=device if str(device).startswith("cuda") else "cpu")
    rgb = dec.get_frames_in_range(0, dec.metadata.num_frames).data  # (n, 3, h, w) uint8
    return list(rgb.flip(1).permute(0, 2, 3, 1).contiguous().cpu().numpy())


def clip_frames(manifest: str | os.PathLike, clips: pd.DataFrame, *, decoder: str = "cv2", device: str = "cpu",
                workers: int = 1, stop: set | frozenset = frozenset()) -> Iterator[tuple[str, int, np.ndarray]]:
    """(clip_id, 1-based frame, BGR frame) for every frame of the given clips, in order.

    ``workers`` > 1 decodes that many clips at once (a GPU outruns one decoding thread);
    with 1 and cv2, frames stream one at a time. A clip that decodes to a different
    number of frames than the manifest says is an error. ``stop``: clips whose remaining
    frames are not wanted (read as it grows: decoding moves on to the next clip).
    """
    paths = [mf.clip_file(manifest, clip) for clip in clips["clip_id"]]

    def check(clip, path, n, expected):
        if not path.is_file():
            raise MediaError(f"{path}: clip {clip} listed as ok in {manifest} but the file is missing")
        if n != expected and clip not in stop:
            raise MediaError(f"{path}: decoded {n} frames, manifest {manifest} says {expected}")

    if workers <= 1 and decoder == "cv2":
        for clip, path, expected in zip(clips["clip_id"], paths, clips["frames"]):
            if not path.is_file():
                check(clip, path, 0, expected)
            n = 0
            for n, frame in enumerate(media.iter_frames(path), start=1):
                if clip in stop:
                    break
                yield clip, n, frame
            check(clip, path, n, expected)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="microg4m-decode") as pool:
        def submit(i):
            return pool.submit(decode_clip, paths[i], decoder, device) if paths[i].is_file() else None

        pending = {i: submit(i) for i in range(min(workers, len(paths)))}  # at most `workers` clips ahead
        for i, (clip, expected) in enumerate(zip(clips["clip_id"], clips["frames"])):
            future = pending.pop(i)
            if i + workers < len(paths):
                pending[i + workers] = submit(i + workers)
            frames = future.result() if future is not None else []
            check(clip, paths[i], len(frames), expected)
            for n, frame in enumerate(frames, start=1):
                if clip in stop:
                    break
                yield clip, n, frame
            del frames


def prefetch(items: Iterable, size: int) -> Iterator:
    """Iterate ``items`` on a worker thread, at most ``size`` items ahead; errors re-raised here."""
    q: queue.Queue = queue.Queue(maxsize=max(1, size))
    stop = threading.Event()
    done = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def work():
        it = iter(items)
        try:
            for item in it:
                if not put(item):
                    return
            put(done)
        except BaseException as exc:  # handed to the consumer
            put(_Failure(exc))
        finally:
            if hasattr(it, "close"):
                it.close()

    worker = threading.Thread(target=work, name="microg4m-decode", daemon=True)
    worker.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item
    finally:
        stop.set()
        worker.join()


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


# --- the stage -----------------------------------------------------------------------

def _table(rows: list[tuple[str, int, np.ndarray]]) -> pa.Table:
    clip = [c for c, _, a in rows for _ in range(len(a))]
    frame = np.concatenate([np.full(len(a), n, np.int32) for _, n, a in rows]) if rows else np.zeros(0, np.int32)
    boxes = np.concatenate([a for _, _, a in rows]) if rows else np.zeros((0, 6), np.float32)
    cols = [pa.array(clip, pa.string()), pa.array(frame, pa.int32())]
    cols += [pa.array(boxes[:, i], pa.float32()) for i in range(5)]
    cols += [pa.array(boxes[:, 5].astype(np.int16), pa.int16())]
    return pa.Table.from_arrays(cols, schema=SCHEMA)


def _check(imgsz, conf, batch) -> None:
    if not isinstance(imgsz, int) or imgsz < 32:
        raise ValueError(f"detect.imgsz = {imgsz!r}: expected an integer >= 32")
    if not 0.0 <= float(conf) <= 1.0:
        raise ValueError(f"detect.conf = {conf!r}: expected a number in [0, 1]")
    if batch != "auto" and (not isinstance(batch, int) or batch < 1):
        raise ValueError(f"detect.batch = {batch!r}: expected an integer >= 1 or auto")


class _Output:
    """Per-clip boxes in frame order, written in clip order as clips finish; what each clip
    needs (every frame, or up to where it became hopeless) and how far it got."""

    def __init__(self, clips: pd.DataFrame, rejection: Rejection | None, writer, keep=None):
        """``keep``: the boxes of a frame that go to the output (None: all)."""
        self.order = list(clips["clip_id"])
        self.frames = dict(zip(clips["clip_id"], (int(k) for k in clips["frames"])))
        self.rejection, self.writer, self.keep = rejection, writer, keep
        self.refine: _Refine | None = None  # the frames held for FP32 until their clip ends (exactness)
        self.rows: dict[str, list] = {c: [] for c in self.order}
        self.persons = dict.fromkeys(self.order, 0)
        self.done = dict.fromkeys(self.order, 0)  # frames resolved, in order
        self.stopped: set[str] = set()  # clips that need no more frames (read by the decoding thread)
        self.ran: dict[str, dict] = {c: {} for c in self.order}  # frames YOLO ran on here (for the cache)
        self.coverage: dict[str, int] = {}
        self.boxes = 0
        self._next = 0
        self._pending: list = []
        self._pending_boxes = 0

    def skip(self, clip: str) -> None:
        """The clip needs no frame at all (screened, or too many cuts)."""
        self.stopped.add(clip)
        self._finish(clip)

    def resolve(self, clip: str, n: int, boxes: np.ndarray) -> None:
        """Frame ``n`` of ``clip`` and its boxes (frames of a clip arrive in order)."""
        if clip in self.stopped or n != self.done[clip] + 1:
            return  # after the clip's stop (ran in the same batch): not part of the output
        self.done[clip] = n
        if len(boxes):
            self.rows[clip].append((clip, n, boxes))
        r = self.rejection
        if r is not None:
            self.persons[clip] += r.person(boxes)
            if r.hopeless(self.persons[clip], n, self.frames[clip]):
                self.stopped.add(clip)
        if clip in self.stopped or n == self.frames[clip]:
            self._finish(clip)

    def _finish(self, clip: str) -> None:
        if self.refine is not None:
            self._settle(clip)
        self.coverage[clip] = self.done[clip]
        while self._next < len(self.order) and self.order[self._next] in self.coverage:
            rows = self.rows.pop(self.order[self._next])
            self._pending += rows
            self._pending_boxes += sum(len(b) for *_, b in rows)
            self._next += 1
            if self._pending_boxes >= ROW_GROUP:
                self.flush()

    def _settle(self, clip: str) -> None:
        """The frames of ``clip`` held for FP32 (exact.KEPT): a clip detect ran to its end may be
        kept, so their FP32 boxes replace their low-precision ones; a stopped clip is never
        tracked, so they are not inferred again, and not cached (the cache keeps frames 1..k)."""
        if clip in self.stopped:
            for n in self.refine.drop(clip):
                self.ran[clip].pop(n, None)
            return
        fp32 = self.refine.settle(clip)
        if fp32:
            self.ran[clip].update(fp32)
            boxes = {n: b for _, n, b in self.rows[clip]}
            boxes.update({n: self.keep(b) if self.keep else b for n, b in fp32.items()})
            self.rows[clip] = [(clip, n, boxes[n]) for n in sorted(boxes) if len(boxes[n])]

    def flush(self) -> None:
        if self._pending:
            self.writer.write_table(_table(self._pending))
            self.boxes += self._pending_boxes
        self._pending, self._pending_boxes = [], 0


def _trim_heap() -> None:
    """Give freed memory back to the system. glibc gives each thread that allocates its own
    heap (arena); frames decoded on one thread and freed on another, beside OpenVINO's
    worker threads, fragment them (measured: 5 GB instead of 1.3 GB for a 30-clip job with
    2 inference threads, flat with this every few hundred frames). A no-op without glibc."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


TRIM_EVERY = 256  # frames
CACHE_CONF = 0.1  # the detector's own low threshold: what the frame cache keeps (detect.conf filters it)


def _above(conf: float):
    """The boxes of a frame the detector gives at ``conf`` (it keeps conf > threshold, in float32)."""
    threshold = np.float32(conf)
    return lambda boxes: boxes[boxes[:, 4] > threshold]


def box_settings(record: dict, *, runtime: str, precision: str, device: str, imgsz: int, conf: float,
                 decoder: str, threads: int | None, batch: int) -> dict:
    """Everything a cached box depends on: the frame cache's key (bench/bench_box_bits.py
    measures which settings change a box, bit for bit, on the CPU).

    The model (and its weights' sha256), runtime, precision, image size, the threshold YOLO
    ran at (``conf``: CACHE_CONF unless detect.conf is lower), the decoder (its frames),
    the hardware (the CPU's instruction sets or the GPU's model: kernels differ), the
    libraries that compute a box (ultralytics, torch, OpenCV, the runtime's), and the
    inference threads for torch and ONNX Runtime (their sums are split over threads). Not
    the batch on a CPU (the same boxes for 1, 4 and 8 frames a pass); on CUDA, where it
    could not be measured here, it stays in.
    """
    # the model by its export's name (folder and file: the weights' sha256, runtime, precision,
    # calibration, versions), not by where the export cache lies
    model = "/".join(Path(record["model"]).parts[-2:])
    settings = dict(model=model, sha256=record["sha256"], runtime=runtime, precision=precision,
                    imgsz=imgsz, conf=conf, decoder=decoder, hardware=rt.device_tag(device),
                    versions=rt.versions(runtime))
    if runtime in ("torch", "onnx"):
        settings["threads"] = threads
    if str(device).startswith("cuda"):
        settings["batch"] = batch
    return settings


def device_here(device: str, record: dict | None, detector=None) -> str:
    """The device this job runs on: ``detect.device`` resolved on this machine (on a cluster
    the node), checked against the detector's record, which was made where the detector
    job ran: a record for another kind of device is an error naming the fix (the detector
    and detect jobs run on the same partition), never a silent run on the CPU of a GPU node."""
    import socket

    here = rt.select_device(device)
    where = (f"{socket.gethostname()} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}, "
             f"CUDA {'available' if here.startswith('cuda') else 'not available'})")
    if here.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"detect.device = {device!r}: this machine, {where}, has no CUDA device")
    logging.getLogger(__name__).info("detect: detect.device %s is %s on %s", device, here, where)
    if record is None:
        return here
    made = record["device"]
    if made.split(":")[0] != here.split(":")[0]:
        raise ValueError(
            f"{detector}: the detector was made for {made}, but this job runs on {here} ({where}, detect.device "
            f"{device!r}): run the detector where detect runs (on a cluster: the same partition and gpu "
            "resource for the detector and detect rules, see docs/clusters.md), then: snakemake --forcerun detector")
    return made


def run(manifest: str | os.PathLike, out: str | os.PathLike, *, weights: str, imgsz: int = 640,
        conf: float = 0.1, batch: int | str = "auto", device: str = "auto", precision: str = "default",
        runtime: str = "auto", decoder: str = "auto", skip_rejected: bool = True, threads: int | None = None,
        cache: str | os.PathLike | None = None, detector: str | os.PathLike | None = None,
        rejection: Rejection | None = None, frame_cache: str | os.PathLike | None = None,
        exact: dict | None = None) -> dict:
    """Detect persons in every frame of the ok clips of ``manifest``; write ``out`` (parquet).

    ``threads``: CPU threads for inference (None: the runtime's default); ``cache``: the
    folder of exported models (None: microg4m.engines.runtime.default_cache()); ``detector``: the
    record the detector stage wrote (the model to load; None: export or find it here).
    ``rejection`` (with ``skip_rejected``): the filter's rule; a clip it rejects whatever
    its frames show gets no frame, and one that becomes hopeless gets no more (the
    parquet's coverage metadata says how many frames each clip got: read_coverage).
    ``frame_cache`` (with ``detector``): a folder where the frames run are kept, so that a
    re-run decodes and runs YOLO only on clips and frames it did not run on before.
    ``exact`` (at a precision below FP32): the filter's and the track stage's thresholds
    (microg4m.engines.exact.watch: ``{"margin": detect.exact_margin, "low": detect.exact_all,
    "person_conf", "count", "tracker", "tracker_low", "record_conf", "closeup_area",
    "min_areas", "intervals"}``); a frame with a box within the margin of one that decides
    something there is inferred again at FP32: at once for the filter's, when its clip ends
    for the track stage's, and never if detect stopped the clip. Returns counts and timing:
    clips, frames (decoded), inferred, exact_frames (inferred again at FP32), exact_held
    (held for the end of their clip), exact_dropped (held, and not inferred again: their clip
    stopped), from_cache, skipped_frames, boxes, seconds, device, runtime, precision,
    exact_margin (the widest) and exact_margins (per threshold).
    """
    passive_openmp()  # before torch loads
    _check(imgsz, conf, batch)
    clips = mf.ok_clips(manifest)
    t0 = time.perf_counter()
    stats = {"clips": len(clips), "frames": 0, "inferred": 0, "exact_frames": 0, "exact_held": 0, "exact_dropped": 0,
             "from_cache": 0, "skipped_frames": 0, "boxes": 0, "device": None, "runtime": None, "precision": None,
             "decoder": None, "exact_margin": 0.0}
    resolve_weights(weights)  # a bad setting fails even for a source without clips
    rt.check_runtime(runtime)  # so does a misspelt runtime
    rt.check_precision(precision)  # or precision
    choose_decoder(decoder, "cpu")  # and a misspelt decoder
    rejection = rejection if skip_rejected else None
    record = read_detector(detector) if detector and len(clips) else None
    fcache, cached, shas = None, {}, {}
    # YOLO keeps the boxes of its own low threshold (or of conf, when lower); the boxes
    # above conf go to the output, all of them to the frame cache, so a conf edit runs no YOLO
    run_conf = min(float(conf), CACHE_CONF)
    keep = _above(conf) if float(conf) > run_conf else None
    watch = None
    ex.check(exact)  # a bad margin fails even for a source without clips
    if len(clips):
        dev = device_here(device, record, detector)
        batch = rt.auto_batch(batch, dev)
        runtime = rt.choose_runtime(runtime, dev, precision)
        precision = rt.choose_precision(precision, runtime, dev)
        if record and (record["runtime"], record["precision"]) != (runtime, precision):
            raise ValueError(f"{detector}: made for {record['runtime']} {record['precision']}, the settings ask "
                             f"for {runtime} {precision}; re-run: snakemake --forcerun detector")
        decoder = choose_decoder(decoder, dev)
        watch = ex.watch(exact, precision, dev, detector_thresholds=(run_conf, float(conf)))
        if watch is not None:
            stats.update(exact_margin=watch.margin, exact_margins=watch.margins())
        # on CPU inference takes the cores and one decoding thread keeps up; a GPU needs more
        workers = max(1, min(8, (threads or os.cpu_count() or 2) - 1)) if dev.startswith("cuda") else 1
        stats.update(device=dev, runtime=runtime, precision=precision, decoder=decoder, decode_workers=workers)
        logging.getLogger(__name__).info("detect: %s %s on %s, batch %d, decoder %s x %d", runtime, precision, dev,
                                         batch, decoder, workers)
        if frame_cache and record:
            key_settings = box_settings(record, runtime=runtime, precision=precision, device=dev, imgsz=imgsz,
                                        conf=run_conf, decoder=decoder, threads=threads, batch=batch)
            if watch is not None:  # which frames ran again at FP32
                key_settings["exact"] = watch.describe()
            fcache = FrameCache(Path(frame_cache) / cache_key(**key_settings), key_settings)
            for source, group in clips.groupby("source_id", sort=False):
                entries = fcache.load(source)
                for clip in group["clip_id"]:
                    shas[clip] = rt.sha256(mf.clip_file(manifest, clip))
                    cached[clip] = entries.get(shas[clip], {})
    metadata = {"weights": str(weights), "imgsz": str(imgsz), "conf": str(conf)}
    with atomic_path(out) as tmp:
        with pq.ParquetWriter(tmp, SCHEMA.with_metadata(metadata)) as writer:
            output = _Output(clips, rejection, writer, keep)
            for clip in clips["clip_id"]:
                if rejection is not None and rejection.whole(clip):
                    output.skip(clip)
                    continue
                for n in range(1, len(cached.get(clip, {})) + 1):  # what an earlier run found
                    if clip in output.coverage:
                        break
                    boxes = cached[clip][n]
                    output.resolve(clip, n, keep(boxes) if keep else boxes)
                    stats["from_cache"] += 1
            todo = clips[~clips["clip_id"].isin(output.coverage)]
            if len(todo):  # loaded only when some frame is still to run
                model = record["model"] if record else None
                # exact_all: the low-precision pass runs below the detector's threshold by the margin
                below = ex.margin(exact.get("margin"), precision, dev, run_conf) if watch and exact.get("low") else 0
                det = Detector(str(weights), runtime=runtime, precision=precision, device=dev, imgsz=imgsz,
                               conf=max(0.0, run_conf - below), batch=batch, threads=threads, cache=cache, model=model)
                if watch is not None:
                    # OpenVINO's bf16/fp16 is a compile-time hint on the FP32 export: the same model
                    same = runtime == "openvino" and precision in ("bf16", "fp16")
                    output.refine = _Refine(watch, run_conf, lambda: Detector(
                        str(weights), runtime=runtime, precision="fp32", device=dev, imgsz=imgsz, conf=run_conf,
                        batch=batch, threads=threads, cache=cache, model=model if same else None), batch, stats)
                frames = prefetch(clip_frames(manifest, todo, decoder=decoder, device=dev, workers=workers,
                                              stop=output.stopped), size=2 * batch)
                _detect(det, frames, output, batch, stats, int(todo["frames"].sum()))
            output.flush()
            writer.add_key_value_metadata({COVERAGE: json.dumps(output.coverage, sort_keys=True)})
    if fcache is not None:
        for source, group in clips.groupby("source_id", sort=False):
            fcache.save(source, {shas[c]: {**cached[c], **output.ran[c]} for c in group["clip_id"]})
    stats["boxes"] = output.boxes
    stats["skipped_frames"] = int(clips["frames"].sum()) - sum(output.coverage.values()) if len(clips) else 0
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    logging.getLogger(__name__).info("detect: %s", stats)
    return stats


class _Refine:
    """Low-precision frames inferred again at FP32 where a box lies near a threshold that
    decides something there (microg4m.engines.exact.Watch): at once where the filter's
    (``exact.EVERY``); where only the track stage's (``exact.KEPT``), held until the clip
    ends, and then only if detect ran it to its end (``settle``; a stopped clip: ``drop``).
    Every other frame keeps its boxes above the detector's threshold."""

    def __init__(self, watch: ex.Watch, run_conf: float, make_fp32, batch: int, stats: dict):
        self.watch, self.above, self.make, self.batch, self.stats = watch, _above(run_conf), make_fp32, batch, stats
        self.fp32 = None  # made when a first frame needs it
        self.held: dict[str, list[tuple[int, np.ndarray]]] = {}  # clip -> (frame number, pixels)

    def _infer(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        if self.fp32 is None:
            self.fp32 = self.make()
        self.stats["exact_frames"] += len(frames)
        return [b for i in range(0, len(frames), self.batch) for b in self.fp32(frames[i:i + self.batch])]

    def __call__(self, items: list[tuple[str, int, np.ndarray]], dets: list[np.ndarray]) -> list[np.ndarray]:
        """The boxes of a batch of ``items`` (clip, frame number, pixels) whose low-precision
        boxes are ``dets``."""
        out = [self.above(boxes) for boxes in dets]
        now = []
        for i, ((clip, n, frame), boxes) in enumerate(zip(items, dets)):
            when = self.watch(boxes, frame.shape, n)
            if when == ex.EVERY:
                now.append(i)
            elif when == ex.KEPT:
                self.held.setdefault(clip, []).append((n, frame))
                self.stats["exact_held"] += 1
        if now:
            for i, boxes in zip(now, self._infer([items[i][2] for i in now])):
                out[i] = boxes
        return out

    def settle(self, clip: str) -> dict[int, np.ndarray]:
        """frame -> FP32 boxes of the frames of ``clip`` held."""
        held = self.held.pop(clip, [])
        return dict(zip((n for n, _ in held), self._infer([f for _, f in held]))) if held else {}

    def drop(self, clip: str) -> list[int]:
        """The frames of ``clip`` held, forgotten (the clip stopped)."""
        held = self.held.pop(clip, [])
        self.stats["exact_dropped"] += len(held)
        return [n for n, _ in held]


def _detect(det: Detector, frames, output: _Output, batch: int, stats: dict, total: int) -> None:
    """Run the frames through the detector in batches, resolving each frame's boxes into
    ``output`` in order (frames an earlier run resolved are decoded only to reach the next);
    ``output.keep``: the boxes of a frame that go to the output (None: all; the cache gets
    all); ``output.refine``: the frames near a threshold inferred again at FP32."""
    run_: list = []

    def infer():
        dets = det([f for _, _, f in run_])
        if output.refine is not None:
            dets = output.refine(run_, dets)
        stats["inferred"] += len(run_)
        for (clip, n, _), boxes in zip(run_, dets):
            output.ran[clip][n] = boxes
            output.resolve(clip, n, output.keep(boxes) if output.keep else boxes)
        run_.clear()

    for clip, n, frame in progress(frames, "detect", total=total, unit="frame"):
        stats["frames"] += 1
        if stats["frames"] % TRIM_EVERY == 0:
            _trim_heap()
        if clip in output.stopped or n <= output.done[clip]:
            continue
        if run_ and (len(run_) >= batch or frame.shape != run_[-1][2].shape):
            infer()
            if clip in output.stopped:  # stopped by a frame of that batch
                continue
        run_.append((clip, n, frame))
    if run_:
        infer()


