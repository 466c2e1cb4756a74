"""Detector stage: the model every detect job runs, made once before any of them starts.

Resolves ``detect.device``, ``detect.runtime`` and ``detect.precision`` to concrete
values on the machine the job runs on (on a cluster: the node, so the detector goes to
the partition detect goes to; detect checks that its node is of the same kind), exports the weights for the runtime (one export with dynamic input axes: every
frame shape) or, for ``int8``, quantizes the FP32 OpenVINO export on frames of the clips
of ``manifests``, and writes ``out``: a JSON record of what the detect jobs load. The
model itself lives in the export cache (microg4m.engines.runtime), so a re-run with the same
settings finds it there.
"""

from __future__ import annotations

import logging
import os
import socket

from microg4m.formats import detector_record
from microg4m.engines import runtime as rt
from microg4m.engines.weights import resolve_weights
from microg4m.engines.model import passive_openmp

log = logging.getLogger(__name__)


def resolve(weights: str, *, runtime: str = "auto", precision: str = "default", device: str = "auto",
            batch="auto") -> dict:
    """The concrete device, runtime, precision and batch of a detect setting."""
    path = resolve_weights(weights)
    dev = rt.select_device(device)
    rtime = rt.choose_runtime(runtime, dev, precision)
    return dict(weights=path, device=dev, runtime=rtime, precision=rt.choose_precision(precision, rtime, dev),
                batch=rt.auto_batch(batch, dev))


def prepare(weights: str, *, imgsz: int = 640, runtime: str = "auto", precision: str = "default",
            device: str = "auto", batch="auto", cache: str | os.PathLike | None = None,
            calibration=()) -> dict:
    """The detector record: concrete settings and ``model``, the file or folder to load
    (exported, or quantized on the frames of the manifests ``calibration`` for int8)."""
    from microg4m.engines.model import load_model

    info = resolve(weights, runtime=runtime, precision=precision, device=device, batch=batch)
    model = load_model(info["weights"], info["device"])  # checks the weights (class 0 = person)
    source = model.ckpt_path or info["weights"]  # a release name ultralytics downloaded: its file
    cache = rt.default_cache(cache)
    if info["runtime"] == "torch":
        path = source
    else:
        path = rt.exported_model(source, info["runtime"], precision=info["precision"], imgsz=imgsz,
                                 batch=info["batch"], device=info["device"], cache=cache)
    if info["precision"] == "int8":
        from microg4m.engines import quantize

        items = quantize.calibration_set(list(calibration))
        path = quantize.quantized_model(path, items, imgsz=imgsz, cache=cache)
        info["calibration"] = dict(frames=len(items), key=quantize.calibration_key(items))
    return dict(info, weights=str(source), sha256=rt.sha256(source), imgsz=imgsz, model=str(path))


def run(out: str | os.PathLike, *, manifests=(), weights: str, imgsz: int = 640, runtime: str = "auto",
        precision: str = "default", device: str = "auto", batch="auto", cache=None, **_detect_settings) -> dict:
    """Prepare the detector and write its record to ``out`` (JSON). ``manifests``: the clips
    an int8 model is calibrated on. Other detect settings (conf, decoder) are ignored here."""
    passive_openmp()  # before torch loads
    record = prepare(weights, imgsz=imgsz, runtime=runtime, precision=precision, device=device, batch=batch,
                     cache=cache, calibration=manifests)
    log.info("detector: detect.device %s is %s on %s (CUDA_VISIBLE_DEVICES=%s): %s %s, %s", device, record["device"],
             socket.gethostname(), os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), record["runtime"],
             record["precision"], record["model"])
    detector_record.write(out, record)
    return record
