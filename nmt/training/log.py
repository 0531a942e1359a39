"""What training writes as it goes: metrics.jsonl rows (mirrored to TensorBoard when installed),
the training and validation log lines, and the pace against a step budget."""

from __future__ import annotations

import json
import logging
import math
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from nmt.data.batching import Batch
from nmt.run_dir import RunDir

log = logging.getLogger("nmt")


def strict_json(row: dict) -> str:
    """One metrics line as strict JSON: a non-finite number (NaN, inf) is written as null."""
    clean = {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()
    }
    return json.dumps(clean, allow_nan=False)


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1024 if sys.platform != "darwin" else rss / 2**20


def duration(seconds: float) -> str:
    """A short human duration: 45s, 6m05s, 1h12m."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Pace:
    """Wall-clock seconds per optimiser step in this process (validation included, compiling
    not: it is paid once), so a step budget (`train.max_steps`) can say up front how long it
    will take on this machine."""

    def __init__(self, step: int, compiled: float = 0.0) -> None:
        self.step0, self.t0, self.compiled0 = step, time.time(), compiled

    def eta(self, step: int, total: int, compiled: float = 0.0) -> tuple[float, float]:
        """(seconds per step so far, seconds left until step `total`); `compiled`: seconds
        spent compiling so far in this process, left out of the step time."""
        spent = time.time() - self.t0 - max(compiled - self.compiled0, 0.0)
        per = max(spent, 0.0) / max(step - self.step0, 1)
        return per, per * max(total - step, 0)


@dataclass
class LogWindow:
    """Running sums between two training log lines (tokens are those of all ranks)."""

    start: float = field(default_factory=time.time)
    tokens: float = 0.0
    loss: float = 0.0
    padding: float = 0.0
    batches: int = 0

    def add(self, out: dict, batches: list[Batch]) -> None:
        self.tokens += out["tokens"]
        self.loss += out["loss_sum"]
        self.padding += sum(b.padding for b in batches)
        self.batches += len(batches)

    def row(
        self, step: int, epoch: int, out: dict, peak_mem_mb: float, compile_s: float = 0.0
    ) -> dict:
        """The metrics.jsonl row of this window, ending with the step that returned `out`;
        `compile_s`: the window's seconds of compilation, left out of tok_s and reported."""
        loss = self.loss / self.tokens
        seconds = max(time.time() - self.start - compile_s, 1e-9)
        return {
            "step": step,
            "split": "train",
            "epoch": epoch + 1,
            "loss": loss,
            "ppl": math.exp(min(loss, 50)),
            "tok_s": self.tokens / seconds,
            **({"compile_s": compile_s} if compile_s else {}),
            "padding": self.padding / self.batches,
            "lr": out["lr"],
            "grad_norm": float(out["grad_norm"]),
            "peak_mem_mb": peak_mem_mb,
        }


class MetricsWriter:
    """Appends rows to RUN/metrics.jsonl (rank 0 alone writes) and to TensorBoard."""

    def __init__(self, run: RunDir, enabled: bool) -> None:
        self.path = run.metrics if enabled else None
        self.tb = _tensorboard(run) if enabled else None

    def write(self, row: dict) -> None:
        if self.path is None:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(strict_json(row) + "\n")
        if self.tb is not None:
            for k, v in row.items():
                if isinstance(v, (int, float)) and k != "step":
                    self.tb.add_scalar(f"{row['split']}/{k}", v, row["step"])

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def _tensorboard(run: RunDir) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # optional extra
        return None
    return SummaryWriter(str(run.tensorboard))


class PaceLog:
    """Progress against the step budget `total`; the first time, the expected total time."""

    def __init__(self, step: int, total: int, compiled: float = 0.0) -> None:
        self.pace, self.total, self.told = Pace(step, compiled), total, False

    def log(self, step: int, compiled: float = 0.0) -> None:
        total = self.total
        per, left = self.pace.eta(step, total, compiled)
        if not self.told:
            log.info(
                f"expected time: about {duration(left)} for the remaining "
                f"{total - step} of {total} steps ({per:.2f} s/step on this machine so far)"
            )
            self.told = True
        log.info(
            f"step {step}/{total} ({100 * step / total:.0f}%), "
            f"{per:.2f} s/step, ETA {duration(left)}"
        )


def log_train_row(row: dict) -> None:
    log.info(
        "step %d: loss %.4f ppl %.2f %.0f tok/s padding %.1f%% lr %.3g grad %.3g mem %.0f MB",
        row["step"],
        row["loss"],
        row["ppl"],
        row["tok_s"],
        100 * row["padding"],
        row["lr"],
        row["grad_norm"],
        row["peak_mem_mb"],
    )
    if row.get("compile_s"):
        log.info("step %d: %.1f s compiling (not in tok/s)", row["step"], row["compile_s"])


def log_valid_row(row: dict, improved: bool) -> None:
    shown = ", ".join(
        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
        for k, v in row.items()
        if k not in ("step", "split", "best", "seconds")
    )
    log.info("valid step %d: %s%s", row["step"], shown, " (new best)" if improved else "")
