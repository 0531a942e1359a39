"""Whether and why training stops: one pure function of what the trainer knows at that moment.

The trainer asks at fixed points (before the first step, at each epoch start, after each step,
after each validation, after a skipped step) and passes only the facts it has there; a fact left
out is never a reason. Under DDP the ranks then agree on the strongest reason (see `STOP_CODES`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional

from nmt.config import Config
from nmt.errors import NmtError

log = logging.getLogger("nmt")

StopKind = Literal["failed", "patience", "signal", "limit"]
# What a rank tells the others in a step's read: a signal (2) outranks a limit (1); patience is
# agreed after validation, and a failed run raises instead of stopping.
STOP_CODES = {"signal": 2, "limit": 1, "patience": 1, "failed": 1}


@dataclass(frozen=True)
class Stop:
    kind: StopKind  # failed: an error; signal: checkpointed but unfinished; else the run is done
    reason: str


def early_stop_reason(patience: int) -> str:
    return f"early stopping: no improvement in {patience} validations"


def stop_decision(
    cfg: Config,
    *,
    step: int = 0,
    epoch: int = 0,
    signal: Optional[str] = None,
    minutes: Optional[float] = None,
    bad_validations: int = 0,
    bad_run: tuple[str, int] = ("nan", 0),
    precision: str = "fp32",
) -> Optional[Stop]:
    """The reason to stop now, or None to go on.

    `step`: optimiser steps done; `epoch`: epochs done; `signal`: the name of a SIGINT/SIGTERM
    received; `minutes`: training time so far; `bad_validations`: validations in a row without
    improvement; `bad_run`: ("nan" or "oom", how many steps in a row were skipped for it);
    `precision`: what the run trains in (fp32 gets no advice to use fp32).
    A failing run outranks a finished one (patience), which outranks a signal, which outranks
    the step, time and epoch limits."""
    t = cfg.train
    kind, n = bad_run
    if n >= t.max_bad_steps:
        if kind == "nan":
            fp32 = (
                "" if precision == "fp32" else f" or use 'train.precision: fp32' (not {precision})"
            )
            return Stop(
                "failed",
                f"training diverged: {n} consecutive steps with a non-finite "
                f"loss at step {step + 1}; lower 'train.lr'{fp32}",
            )
        return Stop("failed", f"out of memory on {n} batches in a row: {oom_advice(cfg)}")
    if t.patience and bad_validations >= t.patience:
        return Stop("patience", early_stop_reason(t.patience))
    if signal:
        return Stop("signal", f"interrupted by {signal}")
    if t.max_steps and step >= t.max_steps:
        return Stop("limit", f"reached max_steps={t.max_steps}")
    if t.max_minutes and minutes is not None and minutes >= t.max_minutes:
        return Stop("limit", f"reached max_minutes={t.max_minutes:g}")
    if t.max_epochs and epoch >= t.max_epochs:
        return Stop("limit", f"reached max_epochs={t.max_epochs}")
    return None


def oom_advice(cfg: Config) -> str:
    return (
        f"lower 'data.batch_tokens' (now {cfg.data.batch_tokens}) or use "
        f"'train.accum_steps' for the same batch size"
    )


class BadSteps:
    """Skipped steps: a non-finite loss, an fp16 overflow, or a CUDA out-of-memory batch. After
    `max_bad_steps` of one kind in a row, training stops with a clear error instead of going on."""

    def __init__(self, cfg: Config, precision: str = "fp32") -> None:
        self.cfg, self.precision = cfg, precision
        self.runs = {"nan": 0, "oom": 0}

    def skipped(self, out: Optional[dict], progress: Any, loss_scale: Callable[[], float]) -> bool:
        """Whether the step that returned `out` was skipped (counted in `progress`)."""
        p = progress
        if out is not None and out.get("skipped") == "scaler":
            # the GradScaler lowers its scale and tries again; the schedule does not move
            p.scaler_skipped += 1
            log.info(
                f"fp16 overflow at step {p.step + 1}: step skipped, loss scale now "
                f"{loss_scale():g} ({p.scaler_skipped} skipped in total)"
            )
            return True
        if out is not None and "oom" not in out:
            self.runs = {"nan": 0, "oom": 0}
            return False
        kind = "nan" if out is None else "oom"
        self.runs[kind] += 1
        n, step = self.runs[kind], p.step + 1
        if kind == "nan":
            p.bad_steps_total += 1
            log.warning(
                f"non-finite loss at step {step}: step skipped ({n} in a row, "
                f"{p.bad_steps_total} in total)"
            )
        else:
            log.warning(
                f"out of memory on a batch of {out['tokens']} padded tokens at step "  # type: ignore[index]
                f"{step}: batch skipped"
            )
        stop = stop_decision(
            self.cfg, step=p.step, epoch=p.epoch, bad_run=(kind, n), precision=self.precision
        )
        if stop is not None and stop.kind == "failed":
            raise NmtError(stop.reason)
        return True
