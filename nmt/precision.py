"""Which precision a device runs fast, and the autocast context for a run's precision.

`precision: auto` picks bf16 only where this machine runs it faster than fp32: a CUDA GPU with
bf16 support, or a CPU with native bf16 units (AVX512-BF16 or AMX). On other CPUs (AVX2 only)
a bf16 matmul is emulated and runs tens of times slower than fp32, so auto means fp32 there.
This module sits at the bottom of the chain (models, training and decoding all use it).
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import lru_cache
from pathlib import Path

import torch

from nmt.errors import NmtError

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@lru_cache(maxsize=1)
def cpuinfo_field(key: str, cpuinfo: str = "/proc/cpuinfo") -> str:
    """The first CPU's `key` field of /proc/cpuinfo ("" where there is none, e.g. macOS)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip()
    return ""


def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of /proc/cpuinfo (empty where there is none, e.g. macOS)."""
    return frozenset(cpuinfo_field("flags").split())


def cpu_vendor() -> str:
    """The CPU's vendor id ("GenuineIntel", "AuthenticAMD", ...); "" where /proc/cpuinfo does
    not say (no such file, an ARM CPU)."""
    return cpuinfo_field("vendor_id")


def cpu_has_bf16() -> bool:
    return any(f in cpu_flags() for f in BF16_CPU_FLAGS)


def bf16_is_fast(device: torch.device) -> bool:
    """bf16 runs natively (and so faster than fp32) on this device."""
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_bf16()


def resolve_precision(precision: str, device: torch.device) -> str:
    """`auto` -> bf16 where the device runs it fast, else fp32; explicit choices are checked."""
    if precision == "auto":
        return "bf16" if bf16_is_fast(device) else "fp32"
    if precision == "fp16" and device.type != "cuda":
        raise NmtError(
            "contradictory options: 'train.precision: fp16' needs a CUDA device (use bf16 on CPU)"
        )
    if (
        precision == "bf16"
        and device.type == "cuda"
        and torch.cuda.is_available()
        and not torch.cuda.is_bf16_supported()
    ):
        raise NmtError(
            f"'train.precision: bf16' is not supported by this GPU "
            f"({torch.cuda.get_device_name(device)}); use fp16 or fp32"
        )
    return precision


def autocast_for(precision: str, device: torch.device):
    """The autocast context of a (resolved or `auto`) precision on a device."""
    p = resolve_precision(precision, device)
    if p == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[p])


def decode_precision(precision: str, device: torch.device, int8: bool = False) -> str:
    """The precision decoding runs in by default: the run's own on a GPU; fp32 on a CPU.

    On a CPU a bf16 matmul's rounding depends on the shape of the whole batch, so bf16 decoding
    gave 4 of 1,000 Multi30k sentences a different translation depending on what else was in
    their batch: evaluation, `nmt translate` and the server must agree line for line whatever
    the batching. (The fp32 master weights are the model; autocast is a training device.) int8
    models decode in fp32 too: their quantized layers take fp32 activations."""
    if int8 or device.type == "cpu":
        return "fp32"
    return resolve_precision(precision, device)


def set_tf32(enabled: bool) -> None:
    """Let CUDA fp32 matmuls and convolutions use TF32 tensor cores (10-bit mantissa products,
    fp32 accumulation); no effect on CPU."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
