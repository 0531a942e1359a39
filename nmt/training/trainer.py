"""The training loop. It steps, validates, checkpoints and stops; its collaborators beside it hold
each of those jobs: `step` (one optimiser step), `schedule` (the learning rate), `rng`,
`checkpoints` (save and exact resume), `log` (metrics rows and log lines), `clock` (training
time), `stopping` and `stop_agreement` (why and when all ranks stop).

A plain loop over deterministic token-budget batches. Everything that decides what happens next
(step, epoch, position in the epoch, RNG states, optimiser, schedule, best score, patience) is in
the checkpoint, so a resumed run continues bit-for-bit like an uninterrupted one.
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path
from typing import Callable, Optional

import torch
from tqdm import tqdm

from nmt.config import Config, TrainConfig
from nmt.config.metrics import higher_is_better
from nmt.data.batching import Batch, BucketBatcher
from nmt.data.heap import bound_kernel_cache, keep_freed_memory
from nmt.data.tokenizer import Tokenizer
from nmt.data.word_dropout import drop_source_words
from nmt.errors import NmtError
from nmt.models.base import NMTModel
from nmt.precision import autocast_for, cpu_has_bf16, resolve_precision, set_tf32
from nmt.run_dir import RunDir
from nmt.training.checkpoints import Progress, TrainCheckpoints
from nmt.training.clock import TrainClock
from nmt.training.compile import compile_seconds
from nmt.training.distributed import DistInfo, all_reduce_flag, barrier
from nmt.training.log import (
    LogWindow,
    MetricsWriter,
    PaceLog,
    log_train_row,
    log_valid_row,
    peak_memory_mb,
)
from nmt.training.loss import projected_cross_entropy, token_cross_entropy
from nmt.training.rng import seed_everything
from nmt.training.schedule import Schedule
from nmt.training.step import StepRunner, make_optimizer, wrap_model
from nmt.training.stop_agreement import StopAgreement
from nmt.training.stopping import BadSteps, early_stop_reason

# Names callers import from here (the training job, benchmarks); they live in the modules above.
__all__ = ["Trainer", "Progress", "autocast_for", "cpu_has_bf16", "peak_memory_mb"]
__all__ += ["resolve_device", "seed_everything", "loss_fn"]

log = logging.getLogger("nmt")
# Validation extras (the metric table's validation metrics) are computed by a function the caller
# passes in, so training never imports decoding or scoring (data flows one way).
ScoreFn = Callable[[NMTModel], dict]


def loss_fn(
    out: torch.Tensor,
    target: torch.Tensor,
    smoothing: float,
    projection: Optional[torch.nn.Linear] = None,
) -> torch.Tensor:
    """Summed token cross-entropy in fp32 (padding ignored) of logits `out`, or, given the
    model's vocabulary projection, of features `out` (projected a chunk of tokens at a time)."""
    if projection is None:
        return token_cross_entropy(out, target, smoothing)
    return projected_cross_entropy(out, projection, target, smoothing)


def resolve_device(cfg: TrainConfig) -> torch.device:
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise NmtError("'train.device: cuda' but no CUDA device is available")
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


class Trainer:
    """Trains `model` on the batcher's epochs until a stop reason, validating every
    `train.valid_every` steps and checkpointing into the run directory."""

    def __init__(
        self,
        cfg: Config,
        model: NMTModel,
        tokenizer: Tokenizer,
        batcher: BucketBatcher,
        valid_batches: list[Batch],
        run_dir: Path,
        dist: DistInfo,
        score_fn: Optional[ScoreFn] = None,
    ) -> None:
        self.cfg, self.tc = cfg, cfg.train
        self.batcher, self.valid_batches = batcher, valid_batches
        self.dist, self.score_fn = dist, score_fn
        self.device = dist.device
        self.progress_bar = False  # the CLI turns it on where stderr is a terminal
        self.precision = resolve_precision(self.tc.precision, self.device)
        keep_freed_memory()  # each step reuses the memory the last one freed (nmt.data.heap)
        bound_kernel_cache()  # new batch shapes every step must not pile up oneDNN kernels
        if self.device.type == "cuda":
            set_tf32(self.tc.tf32)
        self.model = model.to(self.device)
        self.net = wrap_model(self.model, self.tc, dist, cfg.model.arch, cfg.data.shapes == 0)
        self.opt = make_optimizer(self.model, self.tc, self.device)
        self.sched = Schedule(self.tc)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.autocast = autocast_for(self.precision, self.device)
        self.p = Progress()
        self.stop_reason: Optional[str] = None
        self.main = dist.rank == 0
        self.clock = TrainClock()  # a test may replace it with a fake one before `train`
        self.stops = StopAgreement(cfg, dist)
        self.bad_steps = BadSteps(cfg, self.precision)
        self.checkpoints = TrainCheckpoints(RunDir(run_dir), cfg, tokenizer, dist)
        self.metrics = MetricsWriter(RunDir(run_dir), enabled=self.main)
        # the lambda looks the method up at each call, so a test can replace it on the class
        forward = lambda batch: self._forward_loss(batch)  # noqa: E731
        self.steps = StepRunner(self, cfg, dist, forward, self.stops, self._position)

    @property
    def interrupted(self) -> bool:
        """Stopped by a signal (on any rank): checkpointed, unfinished."""
        return self.stops.interrupted

    # ---------------------------------------------------------------- checkpoints and time
    def save(self, best: bool = False, rngs: Optional[list] = None, bookmark: bool = False) -> None:
        """Write a checkpoint (rank 0) holding every rank's generator states; without `rngs`
        this gathers them, so then every rank must call it. `bookmark`: saved on a signal,
        only to resume from (see `TrainCheckpoints`)."""
        rngs = rngs if rngs is not None else self.checkpoints.gather_rngs()
        if self.main:
            self.clock.tick(self.p)  # the checkpoint carries the training time so far
            self.checkpoints.save(self, self.p, best, rngs, bookmark)

    def resume(self, path: Path) -> None:
        self.p = self.checkpoints.resume(path, self)

    def _minutes(self) -> float:
        """Minutes the run has trained, across resumes (what train.max_minutes limits)."""
        self.clock.tick(self.p)
        return self.clock.run_minutes()

    def _position(self) -> tuple[int, int, float]:
        return self.p.step, self.p.epoch, self._minutes()

    # ---------------------------------------------------------------- steps
    def _loss(
        self, net: torch.nn.Module, batch: Batch, smoothing: float, fused: bool
    ) -> torch.Tensor:
        """The batch's summed loss through `net` (the model, or its DDP wrapper); `fused`: the
        loss applies the vocabulary projection itself and never holds the batch's logits."""
        args = (batch.src, batch.src_mask, batch.tgt_in)
        if fused and self.model.has_features:
            out = net(*args, features=True)
            return loss_fn(out, batch.tgt_out, smoothing, self.model.vocab_projection())
        return loss_fn(net(*args), batch.tgt_out, smoothing)

    def _forward_loss(self, batch: Batch) -> torch.Tensor:
        batch = drop_source_words(batch, self.tc.word_dropout)
        # fp16 keeps the logits: its gradients need the loss scale, known only in the backward
        with self.autocast:
            return self._loss(self.net, batch, self.tc.label_smoothing, self.precision != "fp16")

    def train_step(self, batches: list[Batch]) -> Optional[dict]:
        """One optimiser step over `accum_steps` batches (see `StepRunner.run`)."""
        return self.steps.run(batches, self.p.step)

    @torch.no_grad()
    def validate(self) -> dict:
        self.model.eval()
        total, n = torch.zeros((), device=self.device), 0
        for b in self.valid_batches:
            b = b.to(self.device)
            with self.autocast:
                total += self._loss(self.model, b, 0.0, fused=True)
            n += b.n_tokens
        total = total.item()
        row = {"loss": total / max(n, 1), "ppl": math.exp(min(total / max(n, 1), 50))}
        if self.score_fn is not None:
            row.update(self.score_fn(self.model))
        return row

    def _validate_and_checkpoint(self) -> None:
        stop = False
        rngs = self.checkpoints.gather_rngs()
        if self.main and not self.valid_batches:
            # no validation data: nothing to compare, so the latest model is the best one
            self.save(best=True, rngs=rngs)
        elif self.main:
            self.save(best=self._validate_and_record(), rngs=rngs)
            decision = self.stops.decide(
                self.p.step, self.p.epoch, bad_validations=self.p.bad_validations
            )
            stop = decision is not None and decision.kind == "patience"
        barrier()
        if self.dist.world > 1:
            stop = all_reduce_flag(stop, self.device)
        if stop:
            self.stop_reason = early_stop_reason(self.tc.patience)

    def _validate_and_record(self) -> bool:
        """Validate (rank 0), update the best score and the schedule, log the row (with the
        training seconds so far, summed over resumes); whether this is a new best."""
        row = self.validate()
        # without a score (no score function) the loss stands in, and lower loss is better
        name = self.tc.early_stop_metric if self.tc.early_stop_metric in row else "loss"
        metric, hib = row[name], higher_is_better(name)
        improved = self.p.best is None or (metric > self.p.best if hib else metric < self.p.best)
        if improved:
            self.p.best, self.p.bad_validations = metric, 0
        else:
            self.p.bad_validations += 1
        self.sched.observe(metric, hib)
        self.clock.tick(self.p)
        row = {"step": self.p.step, "split": "valid", **row, "best": self.p.best}
        row["seconds"] = self.p.train_seconds
        self.p.history.append(row)
        self.metrics.write(row)
        log_valid_row(row, improved)
        return improved

    # ---------------------------------------------------------------- the loop
    def train(self) -> Progress:
        """Train until a stop reason (`stop_reason`), then validate and checkpoint the end."""
        self.clock.start()
        # a checkpoint saved on a signal comes after its run's last validation
        self._last_valid = self.p.history[-1]["step"] if self.p.history else -1
        self._window = LogWindow()
        self._compiled = compile_seconds()
        self._pace = PaceLog(self.p.step, self.tc.max_steps, self._compiled)
        try:
            with self.stops.catching_signals():
                # a resumed run may have stopped early already, or have no budget left
                self.stop_reason = self._stopped_early() or self.stops.check(*self._position())
                while self.stop_reason is None:
                    self._train_epoch()
                self.clock.tick(self.p)
                if self.interrupted:  # keep the work, skip the (slow) validation
                    self.save(bookmark=True)
                elif self._last_valid != self.p.step:
                    self._validate_and_checkpoint()
        finally:
            self.metrics.close()
        log.info(f"stopped at step {self.p.step}: {self.stop_reason}")
        return self.p

    def _stopped_early(self) -> Optional[str]:
        """The early-stopping reason when this (resumed) run had already used up its patience:
        a finished run stays finished, whatever budget it has left."""
        done = self.stops.decide(self.p.step, self.p.epoch, bad_validations=self.p.bad_validations)
        if done is None or done.kind != "patience":
            return None
        log.info(f"the run had already stopped at step {self.p.step} ({done.reason}): not training")
        return done.reason

    def _train_epoch(self) -> None:
        """The rest of the current epoch, until it ends or a stop reason is set."""
        limit = self.stops.decide(self.p.step, self.p.epoch)  # the same on every rank
        if limit is not None:
            self.stop_reason = limit.reason
            return
        batches = self.batcher.epoch(self.p.epoch)
        bar = tqdm(
            total=len(batches),
            initial=self.p.batch_in_epoch,
            desc=f"epoch {self.p.epoch + 1}",
            leave=False,
            dynamic_ncols=True,
            disable=not (self.main and self.tc.progress and self.progress_bar),
            file=sys.stderr,
        )  # not into a file or pipe: its \r would glue lines
        while self.stop_reason is None and self.p.batch_in_epoch < len(batches):
            self._train_group(batches, bar)
        bar.close()
        if self.stop_reason is None:
            self.p.epoch += 1
            self.p.batch_in_epoch = 0

    def _train_group(self, batches: list, bar: tqdm) -> None:
        """One optimiser step on the next `accum_steps` batches, then logging, validation and
        the stop check."""
        tc, start = self.tc, self.p.batch_in_epoch
        group = batches[start : start + tc.accum_steps]
        data = [self.batcher.batch(ix) for ix in group]
        out = self.train_step(data)
        self.p.batch_in_epoch += len(group)
        bar.update(len(group))
        if self.bad_steps.skipped(out, self.p, self.scaler.get_scale):
            return
        self.p.step += 1
        self._window.add(out, data)  # type: ignore[arg-type]
        if self.p.step % tc.log_every == 0:
            self._log_train(out, bar)  # type: ignore[arg-type]
        if self.p.step % tc.valid_every == 0:
            self._validate_and_checkpoint()
            self._last_valid = self.p.step
        reason = self.stops.check(*self._position(), after_step=True)
        if self.stop_reason:  # early stopping: the run is complete, signal or not
            self.stops.interrupted = False
        else:
            self.stop_reason = reason

    def _log_train(self, out: dict, bar: tqdm) -> None:
        compiled = compile_seconds()
        row = self._window.row(
            self.p.step, self.p.epoch, out, peak_memory_mb(self.device), compiled - self._compiled
        )
        self._compiled = compiled
        self.metrics.write(row)
        if self.main:
            log_train_row(row)
        if self.tc.max_steps and self.main:
            self._pace.log(self.p.step, compiled)
        bar.set_postfix(
            loss=f"{row['loss']:.3f}", tok_s=f"{row['tok_s']:.0f}", lr=f"{row['lr']:.2g}"
        )
        self._window = LogWindow()
