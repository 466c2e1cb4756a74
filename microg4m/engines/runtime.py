"""Inference runtimes and precisions of the detect stage, and the cache of exported models.

``detect.runtime`` picks how YOLO runs: ``torch`` (the weights as they are), or a model
that ultralytics exports once (offline) to OpenVINO, ONNX Runtime or TensorRT.
``detect.precision`` picks the arithmetic: ``fp32`` (on a CPU the default: the boxes are
torch's, so the outputs are the reference's), ``bf16`` / ``fp16`` (OpenVINO's inference
precision hint on a CPU that has them in hardware; half precision on CUDA), ``int8``
(OpenVINO, post-training quantisation with NNCF calibrated on frames of the run's own
clips), or ``auto`` (the fastest floating-point precision the hardware has).

One export serves every frame shape: the export has dynamic input axes (OpenVINO,
ONNX Runtime; TensorRT an optimisation profile up to twice imgsz), and an OpenVINO model
is compiled per letterboxed shape (the shape torch letterboxes that frame size to, 640x480
for a 4:3 frame, never a padded 640x640), so the boxes are those of torch. An export is
keyed by the weights' sha256, the runtime, what the export itself depends on (FP16
weights for ONNX/TensorRT half precision, the calibration set for INT8, the GPU model
for TensorRT) and the library versions; it lives in one folder per key in the cache
folder, written under a temporary name and renamed when complete. A job that wants an
export while another job is making it waits on the folder's file lock (the workflow's
``detector`` rule makes it once, before any detect job starts).

Every runtime goes through ultralytics' own ``predict`` (letterbox, NMS, box scaling),
so its boxes come in the same format and order as torch's. An OpenVINO export of a pose
model drops the keypoint branch of its head (boxes_only): the pipeline keeps boxes only,
the boxes are bit for bit those of the whole head, and a frame costs less.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from microg4m.engines import hardware

log = logging.getLogger(__name__)

SETTING = "detect.runtime"
PRECISION = "detect.precision"
RUNTIMES = ("auto", "torch", "openvino", "onnx", "tensorrt")
PRECISIONS = ("default", "fp32", "bf16", "fp16", "int8", "auto")
# runtime -> (ultralytics export format, distributions it needs, file or folder the export writes)
EXPORTS = {
    "openvino": ("openvino", ("openvino",), "model_openvino_model"),
    "onnx": ("onnx", ("onnx", "onnxruntime"), "model.onnx"),
    "tensorrt": ("engine", ("tensorrt", "onnx"), "model.engine"),
}
INSTALL = {"openvino": "pip install openvino", "onnx": "pip install 'microg4m[onnx]'",
           "tensorrt": "pip install 'microg4m[gpu]'", "nncf": "pip install 'microg4m[int8]'"}
# runtime -> device kind -> the precisions microg4m runs it in
SUPPORTED = {
    "torch": {"cpu": ("fp32",), "cuda": ("fp32", "fp16")},
    "openvino": {"cpu": ("fp32", "bf16", "fp16", "int8")},
    "onnx": {"cpu": ("fp32",), "cuda": ("fp32", "fp16")},
    "tensorrt": {"cuda": ("fp32", "fp16")},
}
OV_PRECISION = {"fp32": "f32", "bf16": "bf16", "fp16": "f16", "int8": "f32"}  # int8: the rest of the graph in f32
CACHE_ENV = "MICROG4M_EXPORT_CACHE"  # one cache folder for every results folder (optional)


# --- choosing a runtime and a precision -----------------------------------------------

def _has(dist: str) -> bool:
    if dist == "onnxruntime":  # the CPU and the GPU wheels install the same module
        return importlib.util.find_spec("onnxruntime") is not None
    return importlib.util.find_spec(dist) is not None


def cuda_visible() -> bool:
    """Whether this machine shows an NVIDIA GPU, without importing torch (the Snakefile asks,
    to declare the ``gpu`` resource only where detect runs on one)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "unset").strip() in ("", "-1"):
        return False
    return any(Path("/proc/driver/nvidia/gpus").glob("*")) or shutil.which("nvidia-smi") is not None


def uses_gpu(device: str) -> bool:
    """Whether ``detect.device`` means a GPU here (auto: CUDA when a GPU is visible)."""
    device = str(device).strip().lower()
    return device.startswith("cuda") or (device == "auto" and cuda_visible())


def installed(runtime: str) -> bool:
    """Whether the packages a runtime needs are importable (torch always is)."""
    return runtime == "torch" or all(_has(d) for d in EXPORTS[runtime][1])


def _version(dist: str) -> str:
    for name in (dist, f"{dist}-gpu", f"{dist}-cu12", f"{dist}-cu13"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def select_device(device: str = "auto") -> str:
    """``detect.device``: ``auto`` -> ``cuda:0`` when CUDA is available, else ``cpu``; anything else as given."""
    device = str(device).strip().lower()
    if device == "auto":
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    return device


def auto_batch(batch, device: str) -> int:
    """``detect.batch: auto``: 4 frames per pass on a CPU, 64 on CUDA. Measured
    (bench/bench_detect.py): on a CPU a 16-frame pass costs ~20 % more per frame than 1-4
    frames (cache misses); a GPU needs large batches to be kept busy."""
    if batch != "auto":
        return int(batch)
    return 64 if str(device).startswith("cuda") else 4


def check_runtime(runtime: str) -> str:
    """The normalised ``detect.runtime`` value; ValueError naming the setting if unknown."""
    key = str(runtime).strip().lower()
    if key not in RUNTIMES:
        raise ValueError(f"{SETTING} = {runtime!r}: expected one of {', '.join(RUNTIMES)}")
    return key


def check_precision(precision: str) -> str:
    """The normalised ``detect.precision`` value; ValueError naming the setting if unknown."""
    key = str(precision).strip().lower()
    if key not in PRECISIONS:
        raise ValueError(f"{PRECISION} = {precision!r}: expected one of {', '.join(PRECISIONS)}")
    return key


def choose_runtime(runtime: str, device: str, precision: str = "default") -> str:
    """The concrete runtime for a ``detect.runtime`` value on ``device`` (cpu, cuda:N, ...).

    ``auto``: on CUDA TensorRT if installed, else torch; elsewhere OpenVINO if installed,
    else ONNX Runtime, else torch; the first of them that runs ``precision``. A named
    runtime that is missing or cannot run on the device is an error naming the setting,
    not a silent fallback.
    """
    key = check_runtime(runtime)
    prec = check_precision(precision)
    cuda = str(device).startswith("cuda")
    if key == "auto":
        order = ("tensorrt", "torch") if cuda else ("openvino", "onnx", "torch")
        usable = [r for r in order if installed(r)]
        fitting = [r for r in usable if prec in ("default", "auto") or prec in SUPPORTED[r].get(_kind(device), ())]
        return (fitting or usable)[0]
    if key != "torch" and not installed(key):
        missing = [d for d in EXPORTS[key][1] if not _has(d)]
        raise ValueError(f"{SETTING} = {runtime!r}: {', '.join(missing)} not installed "
                         f"({INSTALL[key]})")
    if key == "tensorrt" and not cuda:
        raise ValueError(f"{SETTING} = {runtime!r} needs a CUDA device, detect.device is {device!r}")
    if key == "openvino" and cuda:
        raise ValueError(f"{SETTING} = {runtime!r} runs on the CPU, detect.device is {device!r} "
                         "(use tensorrt or torch on CUDA, or detect.device: cpu)")
    return key


def _kind(device: str) -> str:
    return "cuda" if str(device).startswith("cuda") else "cpu"


def choose_precision(precision: str, runtime: str, device: str) -> str:
    """The concrete precision (fp32, bf16, fp16, int8) of ``detect.precision`` for a concrete
    ``runtime`` on ``device``.

    ``default``: fp32 on a CPU (reference-exact), fp16 on CUDA. ``auto``: the fastest
    floating-point precision the hardware has (bf16 on a CPU with AVX-512 BF16 or AMX when
    the runtime is OpenVINO, fp16 on CUDA, else fp32); INT8 is never chosen for you (it
    needs a calibration and moves the boxes most). A precision the runtime, the device or
    the CPU cannot run is an error naming the setting.
    """
    key = check_precision(precision)
    kind = _kind(device)
    if key == "default":
        return "fp16" if kind == "cuda" else "fp32"
    if key == "auto":
        if kind == "cuda":
            return "fp16"
        return "bf16" if runtime == "openvino" and hardware.native_bf16() else "fp32"
    runs = SUPPORTED[runtime].get(kind, ())
    if key not in runs:
        raise ValueError(f"{PRECISION} = {precision!r}: {runtime} on {kind} runs {', '.join(runs)} "
                         f"(bf16, fp16 and int8 on a CPU need detect.runtime openvino)")
    if kind == "cpu" and key == "bf16" and not hardware.native_bf16():
        raise ValueError(f"{PRECISION} = {precision!r}: this CPU has no BF16 instructions (AVX-512 BF16 or "
                         "AMX-BF16); use fp32, or auto for the fastest it has")
    if kind == "cpu" and key == "fp16" and not hardware.native_fp16():
        raise ValueError(f"{PRECISION} = {precision!r}: this CPU has no FP16 instructions (AVX-512 FP16 or "
                         "AMX-FP16); use fp32, or auto for the fastest it has")
    if key == "int8" and not _has("nncf"):
        raise ValueError(f"{PRECISION} = {precision!r}: INT8 quantisation needs NNCF ({INSTALL['nncf']})")
    return key


# --- export cache --------------------------------------------------------------------

def letterbox_shape(frame_shape: tuple[int, ...], imgsz: int) -> tuple[int, int]:
    """(height, width) that ultralytics letterboxes a frame of ``frame_shape`` to for torch
    (aspect kept, each side padded to a multiple of the stride 32)."""
    from ultralytics.data.augment import LetterBox

    h, w = frame_shape[:2]
    out = LetterBox(imgsz, auto=True, stride=32)(image=np.zeros((h, w, 3), np.uint8))
    return int(out.shape[0]), int(out.shape[1])


@functools.lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256(path: str | os.PathLike) -> str:
    st = os.stat(path)
    return _sha256(str(path), st.st_size, st.st_mtime_ns)


def _gpu_tag(device: str) -> str:
    import torch

    name = torch.cuda.get_device_name(torch.device(device))
    return re.sub(r"[^A-Za-z0-9]+", "", name)


def device_tag(device: str) -> str:
    """The hardware whose kernels compute on ``device``: the GPU's model on CUDA, else the
    CPU's instruction sets (microg4m.engines.hardware.ISA) that select OpenVINO's and
    torch's kernels."""
    if str(device).startswith("cuda"):
        return f"cuda {_gpu_tag(device)}"
    return "cpu " + ",".join(n for n in hardware.ISA if hardware.has(n))


def versions(runtime: str) -> dict:
    """The versions of the libraries that compute a box with ``runtime``: ultralytics (pre-
    and post-processing, NMS), torch, OpenCV (decoding, letterbox) and the runtime's own."""
    libs = ["ultralytics", "torch", "opencv-python"]
    if runtime in EXPORTS:
        libs.append(EXPORTS[runtime][1][0] if runtime != "onnx" else "onnxruntime")
    return {lib: _version(lib) for lib in libs}


def export_precision(runtime: str, precision: str) -> str:
    """What an export is made in: OpenVINO exports FP32 (bf16/fp16 is a compile-time hint,
    so one export serves fp32, bf16 and fp16); ONNX and TensorRT store FP16 weights for fp16."""
    if runtime == "openvino":
        return "fp32"
    return "fp16" if precision == "fp16" else "fp32"


def export_key(weights: str | os.PathLike, runtime: str, precision: str = "fp32", *, imgsz: int = 640,
               batch: int = 1, device: str = "cpu") -> str:
    """The cache folder name of one export: readable, and different whenever the export would be."""
    parts = [Path(weights).stem[:24], sha256(weights)[:16], runtime, "dynamic", export_precision(runtime, precision)]
    if runtime == "openvino":
        parts.append("boxes")  # boxes_only(): no keypoint branch
    if runtime == "tensorrt":  # an engine is built for one GPU model, up to a batch and twice imgsz
        parts += [f"b{batch}", f"i{imgsz}", _gpu_tag(device)]
    parts += [f"ul{_version('ultralytics')}", f"{runtime}{_version(EXPORTS[runtime][1][0])}"]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts))


def default_cache(folder: str | os.PathLike | None = None) -> Path:
    """The folder of exported models: $MICROG4M_EXPORT_CACHE if set (one cache for every
    results folder), else ``folder`` (the workflow passes ``<results>/models``), else
    ``$XDG_CACHE_HOME/microg4m/exports`` (``~/.cache/microg4m/exports``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if folder:
        return Path(folder)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "microg4m" / "exports"


def _no_autoinstall() -> None:
    """Ultralytics pip-installs a missing export or runtime requirement on the fly unless told
    not to (YOLO_AUTOINSTALL); a job must never change its environment (and is often offline)."""
    import ultralytics.utils.checks as checks

    checks.AUTOINSTALL = False


def cached(cache: str | os.PathLike, key: str, artefact: str, make, record: dict) -> Path:
    """``cache/key/artefact``, made first by ``make(folder)`` if the cache lacks it: once,
    under the cache's file lock, in a temporary folder renamed when complete (with
    ``export.json``: ``record`` plus the seconds it took)."""
    from filelock import FileLock, Timeout

    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    final = cache / key
    if (final / "export.json").is_file():
        return final / artefact
    lock = FileLock(str(cache / "exports.lock"))  # one lock for the folder: exports are rare and short
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("export %s: another job is exporting to %s; waiting", key, cache)
        lock.acquire()
    try:
        if (final / "export.json").is_file():  # another job finished it while we waited
            return final / artefact
        for stale in cache.glob(f".{key}.tmp*"):  # left by a killed exporter (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp", dir=cache))
        try:
            t0 = time.perf_counter()
            make(tmp)
            if not (tmp / artefact).exists():
                raise RuntimeError(f"export {key} wrote no {artefact} (see the log above)")
            record = dict(record, ultralytics=_version("ultralytics"), seconds=round(time.perf_counter() - t0, 2))
            (tmp / "export.json").write_text(json.dumps(record, indent=1) + "\n")
            os.chmod(tmp, 0o755)  # mkdtemp makes 0700 folders; caches are shared on clusters
            if final.exists():  # a folder without export.json is not an export (emptied by hand?)
                shutil.rmtree(final)
            os.replace(tmp, final)
            log.info("export %s: done in %.1f s", key, record["seconds"])
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        lock.release()
    return final / artefact


def exported_model(weights: str | os.PathLike, runtime: str, *, precision: str = "fp32", imgsz: int = 640,
                   batch: int = 1, device: str = "cpu", cache: str | os.PathLike) -> Path:
    """Path of the ``runtime`` export of ``weights`` (dynamic input axes: every frame shape),
    exporting it first if the cache does not have it yet. ``precision``: the concrete one
    (fp32, bf16, fp16; int8 is quantized_model() on the fp32 OpenVINO export)."""
    key = export_key(weights, runtime, precision, imgsz=imgsz, batch=batch, device=device)
    half = export_precision(runtime, precision) == "fp16"
    record = dict(weights=str(weights), sha256=sha256(weights), runtime=runtime, dynamic=True,
                  precision=export_precision(runtime, precision), imgsz=imgsz, batch=batch, device=str(device),
                  runtime_version=_version(EXPORTS[runtime][1][0]))
    return cached(cache, key, EXPORTS[runtime][2],
                  lambda folder: _export(weights, runtime, imgsz=imgsz, batch=batch, half=half, device=device,
                                         folder=folder), record)


def _export(weights, runtime: str, *, imgsz: int, batch: int, half: bool, device: str, folder: Path) -> None:
    from ultralytics import YOLO

    _no_autoinstall()
    fmt = EXPORTS[runtime][0]
    pt = folder / "model.pt"
    shutil.copyfile(weights, pt)
    try:
        # imgsz: the tracing shape (OpenVINO, ONNX) or the profile's optimum (TensorRT); batch: TensorRT's largest
        kw = dict(format=fmt, imgsz=imgsz, batch=batch, dynamic=True, device=device, verbose=False)
        if half:
            kw["quantize"] = 16
        if runtime in ("onnx", "tensorrt"):
            kw["simplify"] = _has("onnxslim")  # only if installed: never fetched at run time
        out = YOLO(str(pt)).export(**kw)
    except Exception as exc:  # ultralytics raises many types; name the setting and the export
        raise RuntimeError(f"{SETTING} = {runtime!r}: export of {weights} to {fmt} failed: {exc}") from exc
    finally:
        pt.unlink(missing_ok=True)
    if not out:
        raise RuntimeError(f"{SETTING} = {runtime!r}: export of {weights} to {fmt} wrote nothing (see the log above)")
    if runtime == "openvino":
        boxes_only(folder / EXPORTS[runtime][2])


def boxes_only(export: Path) -> bool:
    """Cut the keypoint branch out of the OpenVINO export of a pose model (in place; the
    metadata then says task: detect). Its head ends in one Concat of boxes (4 rows), class
    scores (nc) and keypoints; the new output is the Concat of the first two, so OpenVINO
    drops every operation only the keypoints used. Nothing the boxes depend on changes:
    they are bit for bit the whole head's (tests/test_runtime.py), for less per frame
    (bench/bench_detect.py --whole-head: FP32 -17 %, BF16 -10 %; docs/benchmarks.md).
    Returns whether it cut (False: not a pose model, or a head of another shape)."""
    import openvino as ov
    import openvino.opset13 as opset
    import yaml

    meta_path = export / "metadata.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    if meta.get("task") != "pose" or not meta.get("kpt_shape"):
        return False
    xml = next(export.glob("*.xml"))
    model = ov.Core().read_model(str(xml))
    concat = model.output(0).get_node().input_value(0).get_node()
    parts = [concat.input_value(i) for i in range(concat.get_input_size())]
    rows = [r.get_length() if r.is_static else None for r in (p.get_partial_shape()[1] for p in parts)]
    want = 4 + len(meta["names"])
    static = None not in rows
    keep = next((i for i in range(1, len(rows) + 1) if sum(rows[:i]) == want), None) if static else None
    if concat.get_type_name() != "Concat" or keep is None or sum(rows[keep:]) != int(np.prod(meta["kpt_shape"])):
        log.warning("export %s: its head ends in %s of %s rows, not boxes + %d classes + keypoints; kept whole",
                    export, concat.get_type_name(), rows, len(meta["names"]))
        return False
    boxes = ov.Model([opset.concat(parts[:keep], axis=1).output(0)], model.get_parameters(), model.get_friendly_name())
    boxes.output(0).get_tensor().set_names(model.output(0).get_names())
    tmp = xml.with_name(f".boxes-{xml.name}")  # the read model maps the old .bin: write beside, then rename
    ov.save_model(boxes, str(tmp), compress_to_fp16=False)
    os.replace(tmp.with_suffix(".bin"), xml.with_suffix(".bin"))
    os.replace(tmp, xml)
    meta.update(task="detect", boxes_only=True)
    meta.pop("kpt_shape")
    meta_path.write_text(yaml.safe_dump(meta, sort_keys=False))
    return True


def export_task(path: str | os.PathLike, default: str) -> str:
    """The task an export is loaded as: its metadata's (an OpenVINO export of a pose model
    is a detect model, boxes_only), else ``default`` (the weights' task)."""
    meta = Path(path) / "metadata.yaml"
    if Path(path).is_dir() and meta.is_file():
        import yaml

        return yaml.safe_load(meta.read_text()).get("task") or default
    return default


def load_exported(path: str | os.PathLike, task: str):
    """An ultralytics YOLO object on an exported model (predict works as on the .pt);
    ``task``: the weights' (the export's metadata wins: export_task)."""
    from ultralytics import YOLO

    _no_autoinstall()
    return YOLO(str(path), task=export_task(path, task))


# --- compiling for one shape, threads ---------------------------------------------------

def prepare(model, runtime: str, *, precision: str, threads: int | None, path: str | os.PathLike | None = None,
            shape: tuple[int, int] | None = None, compiled: str | os.PathLike | None = None, batch: int = 1) -> None:
    """Set a loaded model up to run batches of one letterboxed ``shape`` (h, w) in ``precision``
    with ``threads`` CPU threads (torch's intra-op pool, OpenVINO's inference threads, ONNX
    Runtime's intra-op pool). ``path``: the exported model it was loaded from. Call after the
    first ``predict``: ultralytics builds the backend there, with its own thread counts
    (OMP_NUM_THREADS=1 for torch, every core for OpenVINO and ONNX Runtime) and OpenVINO's
    precision default (bf16 on CPUs that have it). ``compiled``: a folder where OpenVINO
    keeps what it compiled (compiled_cache), so that the next job loads it instead.

    OpenVINO with a ``shape``: compiled for that shape with static batch sizes (StaticBatches,
    static_batch_size: ``batch`` is detect's), which run faster than a dynamic batch on the
    same frames, with the same outputs bit for bit (tests/test_runtime.py)."""
    threads = int(threads) if threads else None
    if runtime == "torch":
        if threads:
            import torch

            torch.set_num_threads(threads)
        return
    backend = model.predictor.model.backend
    if runtime == "openvino":
        import openvino as ov

        xml = str(next(Path(path).glob("*.xml")))
        config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": OV_PRECISION[precision]}
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
            # OpenVINO pins its threads to cores: two jobs of one thread each then share one
            # core (measured: each at half speed). Pin only a job that has every core.
            config["ENABLE_CPU_PINNING"] = threads >= (os.cpu_count() or 1)

        def compile_for(dims) -> object:
            ov_model = ov.Core().read_model(xml)
            if dims is not None:
                ov_model.reshape({ov_model.input(): ov.PartialShape(dims)})
            if compiled is None:
                return backend.compile_model(ov_model, config=config)
            with compiled_cache(compiled) as cache_dir:
                return backend.compile_model(ov_model, config={**config, "CACHE_DIR": cache_dir})

        if shape is None:
            backend.ov_compiled_model = compile_for(None)
        else:  # static height, width and batch size: compiled once per batch size called with
            backend.ov_compiled_model = StaticBatches(lambda n: compile_for([n, 3, *shape]),
                                                      static_batch_size(precision, batch))
        # ultralytics reshapes and recompiles per shape itself for INT8 on AMX CPUs and then
        # letterboxes square; this model is compiled for its shape, letterboxed as torch does
        backend.read_model = None
        backend.dynamic = True
    elif runtime == "onnx" and threads and backend.device.type == "cpu":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        backend.session = ort.InferenceSession(str(path), opts, providers=backend.session.get_providers())


class StaticBatches:
    """An OpenVINO model of one input shape compiled with static batch sizes, called as a
    compiled model is (``model(inputs)``, ``get_property``). A call of n frames runs them
    ``size`` at a time and the rest as one smaller batch; each size is compiled when it
    first comes. ultralytics' backend calls it with detect's batches (and shorter ones: the
    last of a shape, a clip's frames inferred again at FP32)."""

    def __init__(self, compile_for, size: int):
        self._compile_for = compile_for
        self.size = int(size)
        self._by_size = {self.size: compile_for(self.size)}

    def _model(self, n: int):
        if n not in self._by_size:
            self._by_size[n] = self._compile_for(n)
        return self._by_size[n]

    def __call__(self, inputs):
        n = int(inputs.shape[0])
        if n <= self.size:
            return self._model(n)(inputs)
        parts = [list(self._model(len(chunk))(chunk).values())
                 for chunk in (inputs[i:i + self.size] for i in range(0, n, self.size))]
        return dict(enumerate(np.concatenate(arrays) for arrays in zip(*parts)))

    def get_property(self, name):
        return self._by_size[self.size].get_property(name)

    def sizes(self) -> list[int]:
        """The batch sizes compiled so far (for tests)."""
        return sorted(self._by_size)


def static_batch_size(precision: str, batch: int) -> int:
    """Frames per OpenVINO inference: FP32 one at a time, lower precisions ``batch`` at a time
    (bench/bench_static_batch.py, Intel Xeon with AMX: FP32 11–13 % and BF16 8–13 % below a
    dynamic batch of 4; FP32 is fastest frame by frame, BF16 and INT8 fill AMX's tiles
    better with 4). The outputs are the same bit for bit whatever the size."""
    return 1 if precision == "fp32" else max(1, int(batch))


@contextlib.contextmanager
def compiled_cache(folder: str | os.PathLike):
    """OpenVINO's model cache (its ``CACHE_DIR``) for one compile, shared by every job safely.

    What OpenVINO compiles depends on the model, the compile settings and the CPU, and it
    names its files by a hash of the first two: so the shared folder has one subfolder per
    OpenVINO version and CPU (model and instruction sets), and a cluster of mixed nodes never
    loads another CPU's compile. OpenVINO writes its files in place, where another job could
    read one half written: each compile runs on a private folder of links to the shared
    files, and what it adds moves into the shared folder whole (a rename). Loading from the
    cache gives the boxes of a fresh compile bit for bit (tests/test_runtime.py)."""
    import openvino as ov

    cpu = hashlib.sha256(f"{hardware.cpu_model()} {sorted(hardware.cpu_flags())}".encode()).hexdigest()[:12]
    shared = Path(folder) / f"openvino{ov.get_version().split('-')[0]}-cpu{cpu}"
    shared.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=shared, prefix=".job-") as tmp:
        for blob in shared.glob("*.blob"):
            try:
                os.link(blob, Path(tmp) / blob.name)
            except OSError:  # (a file system without hard links: compiled again)
                pass
        known = {p.name for p in Path(tmp).iterdir()}
        yield tmp
        for new in Path(tmp).iterdir():
            if new.name not in known and new.is_file():
                os.replace(new, shared / new.name)


def threads_in_use(model, runtime: str) -> int | None:
    """The CPU threads the model's runtime now uses (for logs and tests)."""
    if runtime == "torch":
        import torch

        return torch.get_num_threads()
    backend = model.predictor.model.backend
    if runtime == "openvino":
        return int(backend.ov_compiled_model.get_property("INFERENCE_NUM_THREADS"))
    if runtime == "onnx":
        opts = backend.session.get_session_options()
        return opts.intra_op_num_threads or None
    return None


def precision_in_use(model, runtime: str) -> str | None:
    """OpenVINO's inference precision of a compiled model (f32, bf16, f16), for logs and tests."""
    if runtime != "openvino":
        return None
    hint = model.predictor.model.backend.ov_compiled_model.get_property("INFERENCE_PRECISION_HINT")
    return hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)  # an ov.Type: f32, bf16, f16
