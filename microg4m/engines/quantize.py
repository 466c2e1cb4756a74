"""INT8 detection with OpenVINO: post-training quantisation of the FP32 export with NNCF.

Calibrated on frames of the run's own clips (``calibration_set``: evenly spread over the
ok clips of the manifests given, at most ``CALIBRATION_FRAMES``), each letterboxed and
scaled exactly as ultralytics' ``predict`` feeds the model. The quantized model is cached
like an export, keyed by the FP32 export and the calibration set (every frame's clip file
by its sha256, and the frame number), so the same clips give the same model and another
set another one. The detection head (its sigmoids, box decoding and keypoints) stays in
floating point, as ultralytics' own INT8 export keeps it: quantizing it moves the boxes
most for the least speed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import shutil
from pathlib import Path

import numpy as np

from microg4m.formats import manifest as mf
from microg4m.common import media
from microg4m.engines import runtime as rt

log = logging.getLogger(__name__)

CALIBRATION_FRAMES = 128  # fewer than NNCF's default 300, for a quicker calibration; tests/test_runtime.py checks the int8 boxes against fp32


def calibration_set(manifests, n: int = CALIBRATION_FRAMES) -> list[tuple[Path, int]]:
    """(clip file, 1-based frame) pairs evenly spread over every ok clip of ``manifests``."""
    frames = [(mf.clip_file(m, c), f) for m in manifests for c, k in zip(*_ok(m)) for f in range(1, k + 1)]
    if not frames:
        raise ValueError(f"{rt.PRECISION} = 'int8': no ok clip to calibrate on in {', '.join(map(str, manifests))}")
    if len(frames) <= n:
        return frames
    return [frames[i] for i in np.linspace(0, len(frames) - 1, n).round().astype(int)]


def _ok(manifest) -> tuple[list[str], list[int]]:
    ok = mf.ok_clips(manifest)
    return list(ok["clip_id"]), [int(k) for k in ok["frames"]]


def calibration_key(items: list[tuple[Path, int]]) -> str:
    h = hashlib.sha256()
    for path, frame in items:
        h.update(f"{rt.sha256(path)}:{frame}\n".encode())
    return h.hexdigest()[:16]


def _frames(items: list[tuple[Path, int]]) -> list[np.ndarray]:
    """The BGR frames of ``items``, each clip decoded once."""
    wanted: dict[Path, set[int]] = {}
    for path, frame in items:
        wanted.setdefault(path, set()).add(frame)
    got = {}
    for path, frames in wanted.items():
        for n, image in enumerate(media.iter_frames(path), start=1):
            if n in frames:
                got[(path, n)] = image
    return [got[item] for item in items]


def model_input(frame: np.ndarray, imgsz: int) -> np.ndarray:
    """One frame as ultralytics' predict gives it to the model: letterboxed as torch does
    (aspect kept, padded to the stride), RGB, CHW, float32 in [0, 1], batch of one."""
    from ultralytics.data.augment import LetterBox

    image = LetterBox(imgsz, auto=True, stride=32)(image=frame)
    return np.ascontiguousarray(image[..., ::-1].transpose(2, 0, 1)[None], dtype=np.float32) / 255.0


def _head_scope(ov_model) -> list[str]:
    """Names of the detection head's operations (and every sigmoid): kept in floating point."""
    ops = ov_model.get_ordered_ops()
    sigmoids = [op.get_friendly_name() for op in ops if op.get_type_name() == "Sigmoid"]
    if not sigmoids:
        return []
    head = sigmoids[-1].split("/", 1)[0]
    return [op.get_friendly_name() for op in ops
            if op.get_type_name() == "Sigmoid" or op.get_friendly_name().startswith((f"{head}/", f"{head}.dfl"))]


def quantized_model(fp32_export: str | os.PathLike, items: list[tuple[Path, int]], *, imgsz: int,
                    cache: str | os.PathLike) -> Path:
    """The INT8 OpenVINO model for the FP32 OpenVINO export folder ``fp32_export``, calibrated
    on the frames ``items`` (made once and cached; the folder ultralytics loads)."""
    fp32_export = Path(fp32_export)
    key = f"{fp32_export.parent.name}-int8-cal{calibration_key(items)}-i{imgsz}-nncf{_nncf_version()}"
    record = dict(fp32_export=str(fp32_export), precision="int8", imgsz=imgsz, calibration_frames=len(items),
                  calibration_clips=sorted({p.name for p, _ in items}), nncf=_nncf_version())
    return rt.cached(cache, key, fp32_export.name, lambda folder: _quantize(fp32_export, items, imgsz, folder),
                     record)


def _nncf_version() -> str:
    try:
        return importlib.metadata.version("nncf")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _quantize(fp32_export: Path, items, imgsz: int, folder: Path) -> None:
    import nncf
    import openvino as ov

    xml = next(fp32_export.glob("*.xml"))
    ov_model = ov.Core().read_model(str(xml))
    inputs = [model_input(frame, imgsz) for frame in _frames(items)]
    log.info("int8: calibrating on %d frames of %d clips", len(inputs), len({p for p, _ in items}))
    quantized = nncf.quantize(ov_model, nncf.Dataset(inputs), preset=nncf.QuantizationPreset.MIXED,
                              subset_size=len(inputs), ignored_scope=nncf.IgnoredScope(names=_head_scope(ov_model)))
    out = folder / fp32_export.name
    out.mkdir()
    ov.save_model(quantized, str(out / xml.name), compress_to_fp16=False)
    shutil.copyfile(fp32_export / "metadata.yaml", out / "metadata.yaml")  # names, task, stride: ultralytics reads it
