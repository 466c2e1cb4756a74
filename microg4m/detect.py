"""Detect stage: YOLO boxes on every frame of every ok clip of one source.

The model runs once per frame; its raw boxes (low threshold, every class, with the
class: the reference's tracker sees all of them, so non-person tracks take ids too)
are cached in ``detections/{src}.parquet`` in the model's own order (confidence
descending, as its NMS returns them), so that filter and track never run YOLO again. Frames
are decoded on a worker thread (cv2 releases the GIL) while the model runs, and are fed
in batches that span clip boundaries; nothing grows with the number of clips except the
(small) box table, which is flushed to parquet in row groups.

The model runs with the runtime ``detect.runtime`` picks (microg4m.runtime: torch, or a
cached OpenVINO / ONNX Runtime / TensorRT export) and with the threads the job is given.
"""

from __future__ import annotations

import functools
import importlib.util
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

from .progress import progress
from . import manifest as mf
from . import runtime as rt
from .atomic import atomic_path
from . import media
from .media import MediaError
from .weights import SETTING, resolve_weights

# torch's OpenMP threads spin between operations by default; beside the decoding thread
# on a small machine that starves the decoder (measured: detect.run at 0.18x the raw
# inference rate with 2 threads on 2 cores, 1.0x with passive waiting). Read when the
# OpenMP runtime loads, so it must be set before torch is imported (detect jobs import
# this module first).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

PERSON = 0
COLUMNS = ["clip_id", "frame", "x1", "y1", "x2", "y2", "conf", "cls"]
SCHEMA = pa.schema(
    [("clip_id", pa.string()), ("frame", pa.int32())]
    + [(c, pa.float32()) for c in ("x1", "y1", "x2", "y2", "conf")]
    + [("cls", pa.int16())]
)
ROW_GROUP = 65536  # boxes per parquet row group (bounds the in-memory table)


# --- device and model ----------------------------------------------------------------

def select_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda:0`` when CUDA is available, else ``cpu``; anything else as given."""
    device = str(device).strip().lower()
    if device == "auto":
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    return device


def use_half(half, device: str) -> bool:
    """Half precision only on CUDA; ``auto``/true there, never on CPU."""
    if str(device).startswith("cpu") or str(device) == "mps":
        return False
    if isinstance(half, str):
        key = half.strip().lower()
        if key not in {"auto", "true", "false", "yes", "no", "1", "0"}:
            raise ValueError(f"detect.half = {half!r}: expected auto, true or false")
        return key in {"auto", "true", "yes", "1"}
    return bool(half)


@functools.lru_cache(maxsize=2)
def load_model(weights: str, device: str = "cpu"):
    """Load the YOLO model once (cached per weights/device) and check that class 0 is a person."""
    from ultralytics import YOLO

    path = resolve_weights(weights)
    try:
        model = YOLO(path)
    except Exception as exc:  # ultralytics raises many types for a corrupt or foreign file
        raise ValueError(f"{SETTING} = {weights!r}: cannot load {path} as YOLO weights ({exc})") from None
    names = model.names or {}
    if str(names.get(PERSON, "")).lower() != "person":
        raise ValueError(
            f"{SETTING} = {weights!r}: class 0 of this model is {names.get(PERSON)!r}, not 'person' "
            "(use a COCO-trained detection or pose model)"
        )
    model.to(device)
    return model


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
    return [r.boxes.data[:, :6].float().cpu().numpy().astype(np.float32, copy=False).reshape(-1, 6)
            for r in results]


class Detector:
    """YOLO with the chosen runtime, called on batches of same-shape BGR frames.

    The torch model is always loaded (it checks the weights and is the source of every
    export); an exported runtime gets one export per letterboxed frame shape, made or
    taken from the cache folder when that shape first comes up.
    """

    def __init__(self, weights: str, *, runtime: str = "auto", device: str = "cpu", imgsz: int = 640,
                 conf: float = 0.1, batch: int = 4, half: bool = False, threads: int | None = None,
                 cache: str | os.PathLike | None = None):
        self.device, self.imgsz, self.conf, self.batch, self.half = device, imgsz, conf, batch, half
        self.threads = threads
        self.runtime = rt.choose_runtime(runtime, device)
        self.cache = Path(cache) if cache else rt.default_cache()
        self.torch_model = load_model(str(weights), device)
        self.source = self.torch_model.ckpt_path or resolve_weights(weights)  # downloaded release weights too
        self._models: dict[tuple[int, int], object] = {}
        if self.runtime == "torch":
            rt.set_threads(self.torch_model, "torch", threads)

    def model_for(self, frame_shape: tuple[int, ...]):
        """The model that runs frames of ``frame_shape`` (exported and loaded on first use)."""
        if self.runtime == "torch":
            return self.torch_model
        shape = rt.letterbox_shape(frame_shape, self.imgsz)
        if shape not in self._models:
            path = rt.exported_model(self.source, self.runtime, shape, batch=self.batch, half=self.half,
                                     device=self.device, cache=self.cache)
            model = rt.load_exported(path, self.torch_model.task)
            # the first predict builds ultralytics' backend, then it gets the job's threads
            detect_frames(model, [np.zeros(frame_shape, np.uint8)], imgsz=self.imgsz, conf=self.conf,
                          device=self.device, half=self.half)
            rt.set_threads(model, self.runtime, self.threads, path)
            logging.getLogger(__name__).info("detect: %s model %s for %sx%s frames, %s threads", self.runtime,
                                             path, frame_shape[1], frame_shape[0],
                                             rt.threads_in_use(model, self.runtime))
            self._models[shape] = model
        return self._models[shape]

    def __call__(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        """detect_frames() on one batch, with the model for the batch's frame shape."""
        if not frames:
            return []
        return detect_frames(self.model_for(frames[0].shape), frames, imgsz=self.imgsz, conf=self.conf,
                             device=self.device, half=self.half)


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
                workers: int = 1) -> Iterator[tuple[str, int, np.ndarray]]:
    """(clip_id, 1-based frame, BGR frame) for every frame of the given clips, in order.

    ``workers`` > 1 decodes that many clips at once (a GPU outruns one decoding thread);
    with 1 and cv2, frames stream one at a time. A clip that decodes to a different
    number of frames than the manifest says is an error.
    """
    paths = [mf.clip_file(manifest, clip) for clip in clips["clip_id"]]

    def check(clip, path, n, expected):
        if not path.is_file():
            raise MediaError(f"{path}: clip {clip} listed as ok in {manifest} but the file is missing")
        if n != expected:
            raise MediaError(f"{path}: decoded {n} frames, manifest {manifest} says {expected}")

    if workers <= 1 and decoder == "cv2":
        for clip, path, expected in zip(clips["clip_id"], paths, clips["frames"]):
            if not path.is_file():
                check(clip, path, 0, expected)
            n = 0
            for n, frame in enumerate(media.iter_frames(path), start=1):
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


def batches(items: Iterable[tuple[str, int, np.ndarray]], size: int) -> Iterator[list]:
    """Runs of up to ``size`` frames across clip boundaries; a new run starts when the frame
    shape changes, so every batch is letterboxed like a single frame would be."""
    buf: list = []
    for item in items:
        if buf and (len(buf) >= size or item[2].shape != buf[-1][2].shape):
            yield buf
            buf = []
        buf.append(item)
    if buf:
        yield buf


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


# Measured (bench/bench_detect.py): on CPU a 16-frame forward pass costs ~20 % more per
# frame than 1-4 frames (cache misses); a GPU needs large batches to be kept busy.
AUTO_BATCH = {"cpu": 4, "cuda": 64}


def auto_batch(batch, device: str) -> int:
    return AUTO_BATCH["cuda" if str(device).startswith("cuda") else "cpu"] if batch == "auto" else int(batch)


def run(manifest: str | os.PathLike, out: str | os.PathLike, *, weights: str, imgsz: int = 640,
        conf: float = 0.1, batch: int | str = "auto", device: str = "auto", half="auto", runtime: str = "auto",
        decoder: str = "auto", threads: int | None = None, cache: str | os.PathLike | None = None) -> dict:
    """Detect persons in every frame of the ok clips of ``manifest``; write ``out`` (parquet).

    ``threads``: CPU threads for inference (None: the runtime's default); ``cache``: the
    folder of exported models (None: microg4m.runtime.default_cache()).
    Returns counts and timing: clips, frames, boxes, seconds, device, runtime.
    """
    _check(imgsz, conf, batch)
    clips = mf.ok_clips(manifest)
    schema = SCHEMA.with_metadata({"weights": str(weights), "imgsz": str(imgsz), "conf": str(conf)})
    t0 = time.perf_counter()
    stats = {"clips": len(clips), "frames": 0, "boxes": 0, "device": None, "runtime": None, "decoder": None}
    resolve_weights(weights)  # a bad setting fails even for a source without clips
    rt.check_runtime(runtime)  # so does a misspelt runtime
    choose_decoder(decoder, "cpu")  # and a misspelt decoder
    if len(clips):
        dev = select_device(device)
        batch = auto_batch(batch, dev)
        detector = Detector(str(weights), runtime=runtime, device=dev, imgsz=imgsz, conf=conf, batch=batch,
                            half=use_half(half, dev), threads=threads, cache=cache)
        decoder = choose_decoder(decoder, dev)
        # on CPU inference takes the cores and one decoding thread keeps up; a GPU needs more
        workers = max(1, min(8, (threads or os.cpu_count() or 2) - 1)) if dev.startswith("cuda") else 1
        stats.update(device=dev, runtime=detector.runtime, decoder=decoder, decode_workers=workers)
        logging.getLogger(__name__).info("detect: %s on %s, batch %d, decoder %s x %d", detector.runtime, dev,
                                         batch, decoder, workers)
    with atomic_path(out) as tmp:
        with pq.ParquetWriter(tmp, schema) as writer:
            pending: list = []
            n_pending = 0
            if len(clips):
                frames = prefetch(clip_frames(manifest, clips, decoder=decoder, device=dev, workers=workers),
                                  size=2 * batch)
                total = int(clips["frames"].sum())
                for run_ in progress(batches(frames, batch), "detect", total=-(-total // batch), unit="batch"):
                    dets = detector([f for _, _, f in run_])
                    stats["frames"] += len(run_)
                    for (clip, n, _), arr in zip(run_, dets):
                        if len(arr):
                            pending.append((clip, n, arr))
                            n_pending += len(arr)
                    if n_pending >= ROW_GROUP:
                        writer.write_table(_table(pending))
                        stats["boxes"] += n_pending
                        pending, n_pending = [], 0
            if pending:
                writer.write_table(_table(pending))
                stats["boxes"] += n_pending
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    return stats


def read_detections(path: str | os.PathLike) -> pd.DataFrame:
    """The detection cache as a DataFrame with the documented columns and dtypes."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: detection cache not found (run the detect stage)")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{path}: not a readable parquet file ({exc})") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: detection cache lacks columns {missing} (written by an older "
                         "microg4m? re-run detect: snakemake --forcerun detect)")
    return table.select(COLUMNS).to_pandas()
