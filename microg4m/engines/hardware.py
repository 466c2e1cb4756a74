"""What the CPU can do: the instruction sets that decide the fastest inference precision.

Read from ``/proc/cpuinfo`` (Linux); elsewhere no flag is known, so nothing beyond FP32
is assumed. The benchmark scripts print ``isa_summary()`` beside every speed figure:
the machines this project runs on differ (AVX2 only, or AVX-512 with BF16, VNNI, AMX).
"""

from __future__ import annotations

import functools
import platform
from pathlib import Path

# name shown -> any of these /proc/cpuinfo flags
ISA = {
    "AVX2": ("avx2",),
    "AVX-512": ("avx512f",),
    "AVX-512 BF16": ("avx512_bf16",),
    "AVX-512 FP16": ("avx512_fp16",),
    "VNNI": ("avx512_vnni", "avx_vnni"),
    "AMX-BF16": ("amx_bf16",),
    "AMX-INT8": ("amx_int8",),
    "AMX-FP16": ("amx_fp16",),
}


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is not there)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def has(name: str) -> bool:
    """Whether the CPU has the instruction set ``name`` (a key of ``ISA``)."""
    return any(f in cpu_flags() for f in ISA[name])


def native_bf16() -> bool:
    """BF16 arithmetic in hardware (AVX-512 BF16 or AMX): OpenVINO runs bf16 at about twice FP32's speed."""
    return has("AVX-512 BF16") or has("AMX-BF16")


def native_fp16() -> bool:
    """FP16 arithmetic in hardware (AVX-512 FP16 or AMX-FP16)."""
    return has("AVX-512 FP16") or has("AMX-FP16")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def isa_summary() -> str:
    """e.g. ``Intel Xeon ... : AVX2, AVX-512, AVX-512 BF16, VNNI, AMX-BF16, AMX-INT8`` (no AVX-512 FP16 ...)."""
    present = [n for n in ISA if has(n)]
    absent = [n for n in ISA if not has(n)]
    text = f"{cpu_model()}: {', '.join(present) or 'no AVX2'}"
    return text + (f" (not: {', '.join(absent)})" if absent else "")
