"""Inference runtimes of the detect stage and the cache of exported models.

``detect.runtime`` picks how YOLO runs: ``torch`` (the weights as they are), or a model
that ultralytics exports once (offline) to OpenVINO, ONNX Runtime or TensorRT. The
export is keyed by the weights' sha256, the letterboxed input shape, the runtime, the
batch, the precision and the versions of ultralytics and the runtime (an export from
another version may not load), and lives in one folder per key in the cache folder.
It is written under a temporary name and renamed when complete; a second job that wants
an export while another job is exporting waits on the folder's file lock
(``exports.lock``), then loads the finished one.

Every runtime goes through ultralytics' own ``predict`` (letterbox, NMS, box scaling),
so its boxes come in the same format and order as torch's. Exports have a static input
shape: the letterboxed shape torch would use for that frame size (640x480 for a 4:3
frame at imgsz 640, not a padded 640x640), so that the boxes are those of torch.
"""

from __future__ import annotations

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

log = logging.getLogger(__name__)

SETTING = "detect.runtime"
RUNTIMES = ("auto", "torch", "openvino", "onnx", "tensorrt")
# runtime -> (ultralytics export format, distributions it needs, file or folder the export writes)
EXPORTS = {
    "openvino": ("openvino", ("openvino",), "model_openvino_model"),
    "onnx": ("onnx", ("onnx", "onnxruntime"), "model.onnx"),
    "tensorrt": ("engine", ("tensorrt", "onnx"), "model.engine"),
}
INSTALL = {"openvino": "pip install openvino", "onnx": "pip install 'microg4m[onnx]'",
           "tensorrt": "pip install 'microg4m[gpu]'"}  # openvino is a dependency; the others are extras
CACHE_ENV = "MICROG4M_EXPORT_CACHE"  # one cache folder for every results folder (optional)


# --- choosing a runtime --------------------------------------------------------------

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


def check_runtime(runtime: str) -> str:
    """The normalised ``detect.runtime`` value; ValueError naming the setting if unknown."""
    key = str(runtime).strip().lower()
    if key not in RUNTIMES:
        raise ValueError(f"{SETTING} = {runtime!r}: expected one of {', '.join(RUNTIMES)}")
    return key


def choose_runtime(runtime: str, device: str) -> str:
    """The concrete runtime for a ``detect.runtime`` value on ``device`` (cpu, cuda:N, ...).

    ``auto``: on CUDA TensorRT if installed, else torch; elsewhere OpenVINO if installed,
    else ONNX Runtime, else torch. A named runtime that is missing or cannot run on the
    device is an error naming the setting, not a silent fallback.
    """
    key = check_runtime(runtime)
    cuda = str(device).startswith("cuda")
    if key == "auto":
        order = ("tensorrt", "torch") if cuda else ("openvino", "onnx", "torch")
        return next(r for r in order if installed(r))
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


def export_key(weights: str | os.PathLike, runtime: str, shape: tuple[int, int], batch: int,
               half: bool, device: str = "cpu") -> str:
    """The cache folder name of one export: readable, and different whenever the export would be."""
    parts = [Path(weights).stem[:24], sha256(weights)[:16], runtime, f"{shape[0]}x{shape[1]}", f"b{batch}",
             "fp16" if half else "fp32", f"ul{_version('ultralytics')}", f"{runtime}{_version(EXPORTS[runtime][1][0])}"]
    if runtime == "tensorrt":  # an engine is built for one GPU model
        parts.append(_gpu_tag(device))
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


def exported_model(weights: str | os.PathLike, runtime: str, shape: tuple[int, int], *, batch: int,
                   half: bool = False, device: str = "cpu", cache: str | os.PathLike) -> Path:
    """Path of the ``runtime`` export of ``weights`` for input ``shape`` (h, w) and ``batch``,
    exporting it first if the cache does not have it yet (once, under a file lock)."""
    from filelock import FileLock, Timeout

    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    key = export_key(weights, runtime, shape, batch, half, device)
    final = cache / key
    artefact = final / EXPORTS[runtime][2]
    if (final / "export.json").is_file():
        return artefact
    lock = FileLock(str(cache / "exports.lock"))  # one lock for the folder: exports are rare and short
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("export %s: another job is exporting to %s; waiting", key, cache)
        lock.acquire()
    try:
        if (final / "export.json").is_file():  # another job finished it while we waited
            return artefact
        for stale in cache.glob(f".{key}.tmp*"):  # left by a killed exporter (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp", dir=cache))
        try:
            t0 = time.perf_counter()
            _export(weights, runtime, shape, batch=batch, half=half, device=device, folder=tmp)
            record = dict(weights=str(weights), sha256=sha256(weights), runtime=runtime, shape=list(shape),
                          batch=batch, half=half, device=str(device), ultralytics=_version("ultralytics"),
                          runtime_version=_version(EXPORTS[runtime][1][0]),
                          seconds=round(time.perf_counter() - t0, 2))
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
    return artefact


def _export(weights, runtime: str, shape: tuple[int, int], *, batch: int, half: bool, device: str,
            folder: Path) -> None:
    from ultralytics import YOLO

    _no_autoinstall()
    fmt = EXPORTS[runtime][0]
    pt = folder / "model.pt"
    shutil.copyfile(weights, pt)
    try:
        kw = dict(format=fmt, imgsz=list(shape), batch=batch, dynamic=False, device=device, verbose=False)
        if half:
            kw["quantize"] = 16
        if runtime in ("onnx", "tensorrt"):
            kw["simplify"] = _has("onnxslim")  # only if installed: never fetched at run time
        out = YOLO(str(pt)).export(**kw)
    except Exception as exc:  # ultralytics raises many types; name the setting and the export
        raise RuntimeError(f"{SETTING} = {runtime!r}: export of {weights} to {fmt} "
                           f"at {shape[1]}x{shape[0]}, batch {batch} failed: {exc}") from exc
    finally:
        pt.unlink(missing_ok=True)
    if not out or not (folder / EXPORTS[runtime][2]).exists():
        raise RuntimeError(f"{SETTING} = {runtime!r}: export of {weights} to {fmt} wrote nothing "
                           f"(see the log above)")


def load_exported(path: str | os.PathLike, task: str):
    """An ultralytics YOLO object on an exported model (predict works as on the .pt)."""
    from ultralytics import YOLO

    _no_autoinstall()
    return YOLO(str(path), task=task)


# --- threads -------------------------------------------------------------------------

def set_threads(model, runtime: str, threads: int | None, path: str | os.PathLike | None = None) -> None:
    """Let a loaded model use ``threads`` CPU threads (torch's intra-op pool, OpenVINO's
    inference threads, ONNX Runtime's intra-op pool). ``path``: the exported model it was
    loaded from. Call after the first ``predict``: ultralytics builds the backend there,
    with its own thread counts (OMP_NUM_THREADS=1 for torch, every core for OpenVINO and
    ONNX Runtime, whatever the job was given). OpenVINO is recompiled in FP32 in any case."""
    threads = int(threads) if threads else None
    if runtime == "torch":
        if threads:
            import torch

            torch.set_num_threads(threads)
        return
    backend = model.predictor.model.backend
    if runtime == "openvino":  # recompiled even without a thread count: FP32 always
        import openvino as ov

        ov_model = ov.Core().read_model(str(next(Path(path).glob("*.xml"))))
        config = {"PERFORMANCE_HINT": "LATENCY",
                  "INFERENCE_PRECISION_HINT": ov.Type.f32}  # no bf16 on CPUs that have it: keep torch's boxes
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
            # OpenVINO pins its threads to cores: two jobs of one thread each then share one
            # core (measured: each at half speed). Pin only a job that has every core.
            config["ENABLE_CPU_PINNING"] = threads >= (os.cpu_count() or 1)
        backend.ov_compiled_model = backend.compile_model(ov_model, config=config)
    elif runtime == "onnx" and threads and backend.device.type == "cpu":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        backend.session = ort.InferenceSession(str(path), opts, providers=backend.session.get_providers())


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
