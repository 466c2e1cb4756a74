"""The YOLO model detect runs (and the detector stage exports): loaded once per weights/device."""

from __future__ import annotations

import functools
import os

from microg4m.engines.weights import SETTING, resolve_weights
from microg4m.formats.detections import PERSON


def passive_openmp() -> None:
    """Let torch's OpenMP threads wait passively (unless the environment says otherwise).

    torch's OpenMP threads spin between operations by default; beside the decoding thread
    on a small machine that starves the decoder (measured: detect.run at 0.18x the raw
    inference rate with 2 threads on 2 cores, 1.0x with passive waiting). Read when the
    OpenMP runtime loads, so it must be set before torch is imported: the stages that
    run torch (detect, detector, filter and track, through the tracker) call this first
    thing in ``run``, and :func:`load_model` before it imports ultralytics. Importing a
    module sets nothing.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@functools.lru_cache(maxsize=2)
def load_model(weights: str, device: str = "cpu"):
    """Load the YOLO model once (cached per weights/device) and check that class 0 is a person."""
    passive_openmp()
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
