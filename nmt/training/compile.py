"""Whether the training step runs compiled (`train.compile`), where the compiler keeps its cache,
and how long compiling took.

`auto` compiles only where `benchmarks/ab_step.py` measured the compiled step faster than eager
for that device and architecture (`COMPILE_WINS`); everywhere else, and where no C++ compiler
is found, it runs eager. An explicit `true` compiles or fails in one line.

The compiled kernels are cached on disk under the user's cache folder, beside the prepared
corpora ($NMT_CACHE/compile, default ~/.cache/nmt/compile), so a resumed run, a study's next
model or the next command reuses them. The cache writes each entry to a temporary file and
renames it into place, so two processes may fill it at once.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Optional, Union

import torch

from nmt.errors import NmtError
from nmt.files import cache_root

log = logging.getLogger("nmt")

# (device type, architecture) -> the compiled step measured faster than eager. Absent: unmeasured,
# so `auto` runs eager. See docs/performance.md for the A/B runs behind each entry (Zen 5, in
# benchmarks/step-speed/: the Transformer 0.45-0.77x, ab-compile-*.json; rnnsearch's compiled
# decoder step 0.98x, seq2seq compiled whole 0.96x, ab-compile-rnn-*.json).
COMPILE_WINS: dict[tuple[str, str], bool] = {
    ("cpu", "transformer"): False,
    ("cpu", "rnnsearch"): False,
    ("cpu", "seq2seq"): False,
}

# Static graphs one process may compile for a frame: data.shapes' shapes and each one's shorter
# last batch of an epoch (validation runs the uncompiled model), with room to spare.
MAX_STATIC_GRAPHS = 64


def cache_dir() -> Path:
    return cache_root() / "compile"


def cxx_compiler() -> str | None:
    """The C++ compiler the CPU backend would call (None where there is none)."""
    return shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")


def should_compile(setting: Union[str, bool], device: torch.device, arch: str) -> bool:
    """`train.compile` resolved for this device and architecture; logs why (one line)."""
    where = f"{device.type}, {arch}"
    if setting is False:
        return False
    missing = device.type == "cpu" and cxx_compiler() is None
    if setting is True:
        if missing:
            raise NmtError(
                "'train.compile: true' needs a C++ compiler on the CPU (none found: install "
                "g++ or set CXX), or set train.compile to auto or false"
            )
        log.info(f"compile: on (train.compile: true; {where})")
        return True
    wins = COMPILE_WINS.get((device.type, arch))
    if missing or not wins:
        if missing:
            why = "no C++ compiler found"
        else:
            why = "not measured here" if wins is None else "measured slower than eager here"
        log.info(f"compile: off (train.compile: auto; {where}: {why})")
        return False
    log.info(f"compile: on (train.compile: auto; {where}: measured faster than eager)")
    return True


def with_eager_fallback(compiled: Callable, eager: Callable) -> Callable:
    """`compiled`, until compiling fails (no working compiler, an unsupported op): then one
    warning line, and `eager` from then on (`train.compile: auto`)."""
    failed = False

    def call(*args, **kwargs):
        nonlocal failed
        if not failed:
            try:
                return compiled(*args, **kwargs)
            except torch._dynamo.exc.TorchDynamoException as e:  # includes backend failures
                failed = True
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                log.warning(f"compile failed, training eager instead: {first[:200]}")
        return eager(*args, **kwargs)

    return call


class EagerFallback(torch.nn.Module):
    """The whole model compiled, with `with_eager_fallback`: still a module (the trainer sets
    its mode and, under DDP, asks for no_sync)."""

    def __init__(self, compiled: torch.nn.Module, eager: torch.nn.Module) -> None:
        super().__init__()
        self.compiled, self.eager = compiled, eager
        self.call = with_eager_fallback(compiled, eager)

    def forward(self, *args, **kwargs):
        return self.call(*args, **kwargs)

    def no_sync(self):
        """DDP's no_sync of the wrapped module (gradient accumulation)."""
        return self.eager.no_sync()


class _CompileTime:
    """Seconds spent compiling in this process, from the compiler's own start/end callbacks
    (registered once, when a module is first compiled: an eager run never imports the
    compiler, 1.7 s on this project's 2-core machines)."""

    seconds = 0.0
    started: Optional[float] = None
    registered = False

    told = False

    @classmethod
    def begin(cls, *_args) -> None:
        cls.started = time.perf_counter()
        if not cls.told:  # the first step waits for it, silent for minutes otherwise
            cls.told = True
            log.info("compiling the model (train.compile): the first steps wait for it")

    @classmethod
    def end(cls, *_args) -> None:
        if cls.started is not None:
            cls.seconds += time.perf_counter() - cls.started
            cls.started = None


def compile_seconds() -> float:
    """Seconds this process has spent compiling so far (the training log reports them apart
    from the step time); 0 where nothing was compiled."""
    return _CompileTime.seconds


def compile_module(
    net: Callable, dynamic: bool = True, device_type: str = "cpu", cuda_graphs: bool = True
) -> Callable:
    """`net` under torch.compile, with the kernel cache in `cache_dir()` (unless the user
    chose another with TORCHINDUCTOR_CACHE_DIR). `dynamic`: lengths and batch sizes are
    symbolic from the start, since token-bucketed batches change shape every step and one
    graph with symbolic sizes serves them all instead of a recompilation per shape. Batches of
    a few fixed shapes (`data.shapes`) compile static graphs instead, one per shape; on CUDA
    each is also captured as a CUDA graph (`reduce-overhead`), replayed with one launch, unless
    not `cuda_graphs` (a region called once per time step: a graph's replay overwrites the
    outputs of the one before, which the next step and the backward pass still read). `net` may
    be a module or a function."""
    if not _CompileTime.registered:
        torch._dynamo.callback.on_compile_start(_CompileTime.begin)
        torch._dynamo.callback.on_compile_end(_CompileTime.end)
        _CompileTime.registered = True
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_dir() / "inductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(cache_dir() / "triton"))
    if not dynamic:
        # a graph per shape and per shape's shorter last batch: past torch's default of 8
        # recompilations a frame, the rest would run eager
        limit = torch._dynamo.config.recompile_limit
        torch._dynamo.config.recompile_limit = max(limit, MAX_STATIC_GRAPHS)
    mode = "reduce-overhead" if cuda_graphs and not dynamic and device_type == "cuda" else None
    return torch.compile(net, dynamic=dynamic, mode=mode)
