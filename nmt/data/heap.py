"""When the process gives freed heap memory back to the system (glibc), and when it keeps it.

glibc raises its mmap threshold to the size of the largest block freed so far, so after one
large numpy temporary is freed the next ones come from the heap, and freeing them leaves the
process holding their peak: planning an epoch of 1.8M pairs left 50 MB of freed temporaries in
every rank's resident memory. `malloc_trim` returns the free pages.

A training step is the opposite case: it frees and reallocates the same large activations and
logit chunks every step, and each one glibc hands back to the system (through munmap, or by
trimming the top of the heap) comes back as fresh pages that fault in one by one. On a 2-core
Zen 4 the Multi30k Transformer step took 40-50 thousand page faults and about 0.07-0.16 s of
system time a step; `keep_freed_memory` cut that to 11-13 thousand and 0.02-0.06 s (one-thread
probes beside a training run); with the fused loss casting once, the step ran 5% faster alone on
one thread (docs/performance.md). Beam search does the same with its per-step logits (300
Multi30k sentences, beam 5: 214 -> 114 thousand faults). The CLI and the trainer turn it on.
"""

from __future__ import annotations

import ctypes
import os

# oneDNN keeps a compiled primitive (kernels and their buffers) per matmul shape it has seen,
# 1,024 of them by default; token-bucketed batches bring new shapes every step, so a CPU
# training process grew for hours. 16 keeps a step's own shapes. Measured on the Europarl
# Transformer (2-core Intel Xeon with AMX, bf16, one thread each, side by side, 60 steps): peak
# resident memory 2.8 -> 6.2 GB with the default, 2.2 -> 3.4 GB with 16, at 1,163-1,328 and
# 1,225-1,396 tokens/s.
ONEDNN_CACHE = "16"

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def give_back_freed_memory() -> None:
    """Return free heap pages to the system (glibc); elsewhere nothing to do."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def keep_freed_memory(mmap_threshold: int = 32 << 20, trim_threshold: int = 1 << 30) -> None:
    """Serve blocks under `mmap_threshold` bytes from the heap and keep up to `trim_threshold`
    bytes of free heap, so the blocks a step frees are reused by the next step instead of
    faulting in again (glibc; elsewhere nothing to do). The process's resident memory then
    stays near its peak, which a training process reaches every step anyway."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
        libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)
    except (OSError, AttributeError):
        pass


def bound_kernel_cache() -> None:
    """Cap oneDNN's primitive cache (see ONEDNN_CACHE) unless the user set it; it takes effect
    when oneDNN first reads it, at the process's first matmul, so call it before any."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", ONEDNN_CACHE)
