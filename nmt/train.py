"""The training loop: precision, schedules, validation, early stopping, checkpoints, exact resume.

A plain loop over deterministic token-budget batches. Everything that decides what happens next
(step, epoch, position in the epoch, RNG states, optimiser, schedule, best score, patience) is in
the checkpoint, so a resumed run continues bit-for-bit like an uninterrupted one.
"""
from __future__ import annotations

import json
import logging
import math
import random
import resource
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from nmt.checkpoint import (load_checkpoint, model_payload, save_checkpoint, step_checkpoints,
                            tokenizer_payload)
from nmt.config import Config, TrainConfig, to_dict
from nmt.data.batching import Batch, BucketBatcher
from nmt.data.tokenizer import PAD, Tokenizer
from nmt.distributed import DistInfo, all_reduce_flag, all_reduce_max, barrier
from nmt.errors import NmtError
from nmt.models.base import NMTModel

log = logging.getLogger("nmt")
# Validation extras (BLEU, chrF) are computed by a function the caller passes in, so training
# never imports decoding or metrics (data flows one way).
ScoreFn = Callable[[NMTModel], dict]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict:
    st = np.random.get_state()
    return {"python": random.getstate(), "numpy": [st[0], st[1].tolist(), st[2], st[3], st[4]],
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(st: dict) -> None:
    random.setstate(st["python"])
    n = st["numpy"]
    np.random.set_state((n[0], np.array(n[1], dtype=np.uint32), n[2], n[3], n[4]))
    torch.set_rng_state(st["torch"])
    if st["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])


class Schedule:
    """Learning rate as a function of the step, times a plateau factor updated on validation.

    constant: lr after linear warm-up; noam / inverse_sqrt: linear warm-up to lr, then
    lr * sqrt(warmup / step) (Vaswani et al.'s schedule with `lr` as its peak); plateau: lr times
    `plateau_factor` each time validation fails to improve for `plateau_patience` validations.
    """

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.scale, self.best, self.bad = 1.0, None, 0

    def lr(self, step: int) -> float:
        c = self.cfg
        if c.schedule == "plateau":
            return max(c.lr * self.scale, c.min_lr)
        warm = min(1.0, step / c.warmup_steps) if c.warmup_steps else 1.0
        if c.schedule in ("noam", "inverse_sqrt") and c.warmup_steps and step > c.warmup_steps:
            return c.lr * math.sqrt(c.warmup_steps / step)
        return c.lr * warm

    def observe(self, score: float, higher_is_better: bool) -> None:
        if self.cfg.schedule != "plateau":
            return
        if self.best is None or (score > self.best if higher_is_better else score < self.best):
            self.best, self.bad = score, 0
        else:
            self.bad += 1
            if self.bad > self.cfg.plateau_patience:
                self.scale *= self.cfg.plateau_factor
                self.bad = 0
                log.info(f"plateau: learning rate scaled to {self.lr(0):.3g}")

    def state_dict(self) -> dict:
        return {"scale": self.scale, "best": self.best, "bad": self.bad}

    def load_state_dict(self, st: dict) -> None:
        self.scale, self.best, self.bad = st["scale"], st["best"], st["bad"]


def loss_fn(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Summed token cross-entropy in fp32 (padding ignored)."""
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), target.reshape(-1),
                           ignore_index=PAD, label_smoothing=smoothing, reduction="sum")


def resolve_device(cfg: TrainConfig) -> torch.device:
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise NmtError("'train.device: cuda' but no CUDA device is available")
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


def autocast_for(precision: str, device: torch.device):
    """The autocast context for a precision, checked against the device."""
    if precision == "fp32":
        return nullcontext()
    if precision == "fp16" and device.type != "cuda":
        raise NmtError("contradictory options: 'train.precision: fp16' needs a CUDA device "
                       "(use bf16 on CPU)")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


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
    """Wall-clock seconds per optimiser step in this process (validation included), so a step
    budget (`train.max_steps`) can say up front how long it will take on this machine."""

    def __init__(self, step: int) -> None:
        self.step0, self.t0 = step, time.time()

    def eta(self, step: int, total: int) -> tuple[float, float]:
        """(seconds per step so far, seconds left until step `total`)."""
        per = (time.time() - self.t0) / max(step - self.step0, 1)
        return per, per * max(total - step, 0)


@dataclass
class Progress:
    """What a checkpoint needs to continue exactly where training stopped."""
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best: Optional[float] = None
    bad_validations: int = 0
    bad_steps_total: int = 0
    train_seconds: float = 0.0
    history: list = field(default_factory=list)


class Trainer:
    def __init__(self, cfg: Config, model: NMTModel, tokenizer: Tokenizer, batcher: BucketBatcher,
                 valid_batches: list[Batch], run_dir: Path, dist: DistInfo,
                 score_fn: Optional[ScoreFn] = None) -> None:
        self.cfg, self.tc = cfg, cfg.train
        self.tokenizer, self.batcher, self.valid_batches = tokenizer, batcher, valid_batches
        self.run_dir, self.dist, self.score_fn = run_dir, dist, score_fn
        self.device = dist.device
        self.model = model.to(self.device)
        self.net: torch.nn.Module = self.model
        if self.tc.compile:
            self.net = torch.compile(self.net)
        if dist.world > 1:
            self.net = torch.nn.parallel.DistributedDataParallel(
                self.net, device_ids=[dist.local_rank] if self.device.type == "cuda" else None)
        opt_cls = torch.optim.AdamW if self.tc.optimizer == "adamw" else torch.optim.Adam
        self.opt = opt_cls(self.model.parameters(), lr=self.tc.lr, betas=tuple(self.tc.betas),
                           weight_decay=self.tc.weight_decay)
        self.sched = Schedule(self.tc)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.tc.precision == "fp16")
        self.autocast = autocast_for(self.tc.precision, self.device)
        self.p = Progress()
        self.stop_reason: Optional[str] = None
        self._clock = time.time()
        self._signal: Optional[str] = None
        self.interrupted = False  # stopped by a signal (on any rank): checkpointed, unfinished
        self.main = dist.rank == 0
        self.metrics_path = run_dir / "metrics.jsonl"
        self.tb = self._tensorboard() if self.main else None

    # ---------------------------------------------------------------- bookkeeping
    def _tensorboard(self):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # optional extra
            return None
        return SummaryWriter(str(self.run_dir / "tensorboard"))

    def _record(self, row: dict) -> None:
        if not self.main:
            return
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        if self.tb is not None:
            for k, v in row.items():
                if isinstance(v, (int, float)) and k != "step":
                    self.tb.add_scalar(f"{row['split']}/{k}", v, row["step"])

    def _higher_is_better(self) -> bool:
        return self.tc.early_stop_metric != "loss"

    def checkpoint_payload(self) -> dict:
        self._tick()
        return {"config": to_dict(self.cfg), "model": model_payload(self.net),
                "optimizer": self.opt.state_dict(), "schedule": self.sched.state_dict(),
                "scaler": self.scaler.state_dict(), "progress": vars(self.p).copy(),
                "step": self.p.step, "rng": rng_state(),
                "tokenizer": tokenizer_payload(self.tokenizer),
                "params": self.model.num_parameters()}

    def save(self, best: bool = False) -> None:
        if not self.main:
            return
        ck_dir = self.run_dir / "checkpoints"
        ck_dir.mkdir(exist_ok=True)
        payload = self.checkpoint_payload()
        save_checkpoint(ck_dir / f"step_{self.p.step}.pt", payload)
        if best:
            save_checkpoint(self.run_dir / "best.pt", payload)
        for old in step_checkpoints(self.run_dir)[:-self.tc.keep_last]:
            old.unlink(missing_ok=True)

    def resume(self, path: Path) -> None:
        ck = load_checkpoint(path)
        try:
            self.model.load_state_dict(ck["model"])
        except RuntimeError:
            raise NmtError(f"checkpoint {path} does not fit this model (architecture or "
                           f"vocabulary changed?)") from None
        self.opt.load_state_dict(ck["optimizer"])
        self.sched.load_state_dict(ck["schedule"])
        self.scaler.load_state_dict(ck["scaler"])
        self.p = Progress(**ck["progress"])
        set_rng_state(ck["rng"])
        log.info(f"resumed from {path} at step {self.p.step} (epoch {self.p.epoch + 1}, "
                 f"batch {self.p.batch_in_epoch})")

    # ---------------------------------------------------------------- signals
    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signal = signal.Signals(signum).name

    def _install_signals(self) -> dict:
        old = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                old[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread (e.g. called from a test thread)
                pass
        return old

    # ---------------------------------------------------------------- steps
    def _forward_loss(self, batch: Batch) -> torch.Tensor:
        with self.autocast:
            logits = self.net(batch.src, batch.src_mask, batch.tgt_in)
        return loss_fn(logits, batch.tgt_out, self.tc.label_smoothing)

    def train_step(self, batches: list[Batch]) -> Optional[dict]:
        """One optimiser step over `accum_steps` batches; None when the loss was not finite."""
        self.net.train()
        lr = self.sched.lr(self.p.step + 1)
        for g in self.opt.param_groups:
            g["lr"] = lr
        total_loss, n_tok = 0.0, sum(b.n_tokens for b in batches)
        finite = True
        try:
            for i, b in enumerate(batches):
                b = b.to(self.device)
                sync = (self.dist.world == 1 or i == len(batches) - 1)
                with nullcontext() if sync else self.net.no_sync():
                    loss = self._forward_loss(b)
                    if not torch.isfinite(loss):
                        finite = False
                        if self.dist.world == 1:
                            break
                        # Every rank must still run backward (DDP all-reduces gradients there);
                        # the step is dropped on all ranks below.
                        loss = loss.nan_to_num(0.0, 0.0, 0.0)
                    self.scaler.scale(loss / n_tok).backward()
                total_loss += loss.item()
        except torch.cuda.OutOfMemoryError:
            if self.dist.world > 1:
                # the other ranks are waiting in a gradient all-reduce: skipping is not possible
                raise NmtError(f"out of memory on a batch of {sum(b.n_slots for b in batches)} "
                               f"padded tokens: {self._oom_advice()}") from None
            self.opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            return {"oom": True, "tokens": sum(b.n_slots for b in batches)}
        if self.dist.world > 1:
            finite = not all_reduce_flag(not finite, self.device)
        if not finite:
            self.opt.zero_grad(set_to_none=True)
            return None
        self.scaler.unscale_(self.opt)
        gnorm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.tc.clip_grad if self.tc.clip_grad > 0 else float("inf"))
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad(set_to_none=True)
        return {"loss": total_loss / n_tok, "lr": lr, "grad_norm": float(gnorm)}

    @torch.no_grad()
    def validate(self) -> dict:
        self.model.eval()
        total, n = 0.0, 0
        for b in self.valid_batches:
            b = b.to(self.device)
            with self.autocast:
                logits = self.model(b.src, b.src_mask, b.tgt_in)
            total += loss_fn(logits, b.tgt_out, 0.0).item()
            n += b.n_tokens
        row = {"loss": total / max(n, 1), "ppl": math.exp(min(total / max(n, 1), 50))}
        if self.score_fn is not None:
            row.update(self.score_fn(self.model))
        return row

    def _oom_advice(self) -> str:
        return (f"lower 'data.batch_tokens' (now {self.cfg.data.batch_tokens}) or use "
                f"'train.accum_steps' for the same batch size")

    def _skipped(self, out: Optional[dict]) -> bool:
        """Count a skipped step (non-finite loss, or CUDA out of memory); after
        `max_bad_steps` of one kind in a row, stop with a clear error instead of going on."""
        if out is not None and "oom" not in out:
            self._runs = {"nan": 0, "oom": 0}
            return False
        kind = "nan" if out is None else "oom"
        self._runs[kind] += 1
        n, step = self._runs[kind], self.p.step + 1
        if kind == "nan":
            self.p.bad_steps_total += 1
            log.warning(f"non-finite loss at step {step}: step skipped ({n} in a row, "
                        f"{self.p.bad_steps_total} in total)")
            if n >= self.tc.max_bad_steps:
                raise NmtError(f"training diverged: {n} consecutive steps with a non-finite loss "
                               f"at step {step}; lower 'train.lr' or use 'train.precision: fp32'")
        else:
            log.warning(f"out of memory on a batch of {out['tokens']} padded tokens at step "
                        f"{step}: batch skipped")
            if n >= self.tc.max_bad_steps:
                raise NmtError(f"out of memory on {n} batches in a row: {self._oom_advice()}")
        return True

    # ---------------------------------------------------------------- the loop
    def _log_pace(self, pace: Pace, told: bool) -> bool:
        """Progress against the step budget; the first time, the expected total time."""
        total = self.tc.max_steps
        per, left = pace.eta(self.p.step, total)
        if not told:
            log.info(f"expected time: about {duration(left)} for the remaining "
                     f"{total - self.p.step} of {total} steps ({per:.2f} s/step on this machine "
                     f"so far)")
        log.info(f"step {self.p.step}/{total} ({100 * self.p.step / total:.0f}%), "
                 f"{per:.2f} s/step, ETA {duration(left)}")
        return True

    def _tick(self) -> None:
        """Move wall-clock time since the last tick into progress (so checkpoints carry it)."""
        now = time.time()
        self.p.train_seconds += now - self._clock
        self._clock = now

    def _limits_reached(self) -> Optional[str]:
        tc = self.tc
        if tc.max_steps and self.p.step >= tc.max_steps:
            return f"reached max_steps={tc.max_steps}"
        self._tick()
        if tc.max_minutes and self.p.train_seconds / 60 >= tc.max_minutes:
            return f"reached max_minutes={tc.max_minutes:g}"
        return None

    def _stop_check(self) -> Optional[str]:
        """Why to stop now, if at all: a signal or a limit. Ranks decide together (the strongest
        reason on any rank wins), so all of them take the same path to the end of the run."""
        reason = f"interrupted by {self._signal}" if self._signal else self._limits_reached()
        code = 2 if self._signal else int(reason is not None)
        if self.dist.world > 1:
            agreed = all_reduce_max(code, self.device)
            if agreed > code:
                reason = ("interrupted on another rank" if agreed == 2
                          else "a limit was reached on another rank")
            code = agreed
        self.interrupted = code == 2
        return reason

    def _validate_and_checkpoint(self) -> None:
        stop = 0
        if self.main and not self.valid_batches:
            # no validation data: nothing to compare, so the latest model is the best one
            self.save(best=True)
        elif self.main:
            row = self.validate()
            metric = row.get(self.tc.early_stop_metric, row["loss"])
            hib = self._higher_is_better() and self.tc.early_stop_metric in row
            improved = self.p.best is None or (metric > self.p.best if hib else metric < self.p.best)
            if improved:
                self.p.best, self.p.bad_validations = metric, 0
            else:
                self.p.bad_validations += 1
            self.sched.observe(metric, hib)
            row = {"step": self.p.step, "split": "valid", **row, "best": self.p.best}
            self.p.history.append(row)
            self._record(row)
            log.info("valid step %d: %s%s", self.p.step,
                     ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                               for k, v in row.items() if k not in ("step", "split", "best")),
                     " (new best)" if improved else "")
            self.save(best=improved)
            stop = int(bool(self.tc.patience) and self.p.bad_validations >= self.tc.patience)
        barrier()
        if self.dist.world > 1:
            stop = int(all_reduce_flag(bool(stop), self.device))
        if stop:
            self.stop_reason = f"early stopping: no improvement in {self.tc.patience} validations"

    def train(self) -> Progress:
        tc = self.tc
        old_handlers = self._install_signals()
        self._clock = time.time()
        # a checkpoint saved on a signal comes after its run's last validation
        last_valid_step = self.p.history[-1]["step"] if self.p.history else -1
        log_t, log_tok, log_loss, log_pad, log_n = time.time(), 0, 0.0, 0.0, 0
        self._runs = {"nan": 0, "oom": 0}
        pace, told = Pace(self.p.step), False
        try:
            self.stop_reason = self._stop_check()  # a resumed run may have no budget left
            while self.stop_reason is None:
                if tc.max_epochs and self.p.epoch >= tc.max_epochs:
                    self.stop_reason = f"reached max_epochs={tc.max_epochs}"
                    break
                batches = self.batcher.epoch(self.p.epoch)
                bar = tqdm(total=len(batches), initial=self.p.batch_in_epoch,
                           desc=f"epoch {self.p.epoch + 1}", leave=False, dynamic_ncols=True,
                           disable=not (self.main and tc.progress and sys.stderr.isatty()),
                           file=sys.stderr)  # not into a file or pipe: its \r would glue lines
                while self.p.batch_in_epoch < len(batches):
                    group = batches[self.p.batch_in_epoch:self.p.batch_in_epoch + tc.accum_steps]
                    data = [self.batcher.batch(ix) for ix in group]
                    out = self.train_step(data)
                    self.p.batch_in_epoch += len(group)
                    bar.update(len(group))
                    if self._skipped(out):
                        continue
                    self.p.step += 1
                    ntok = sum(b.n_tokens for b in data)
                    log_tok += ntok
                    log_loss += out["loss"] * ntok
                    log_pad += sum(b.padding for b in data)
                    log_n += len(data)
                    if self.p.step % tc.log_every == 0:
                        el = time.time() - log_t
                        row = {"step": self.p.step, "split": "train", "epoch": self.p.epoch + 1,
                               "loss": log_loss / log_tok, "ppl": math.exp(min(log_loss / log_tok, 50)),
                               "tok_s": log_tok * self.dist.world / el, "padding": log_pad / log_n,
                               "lr": out["lr"], "grad_norm": out["grad_norm"],
                               "peak_mem_mb": peak_memory_mb(self.device)}
                        self._record(row)
                        if self.main:
                            log.info("step %d: loss %.4f ppl %.2f %.0f tok/s padding %.1f%% lr %.3g "
                                     "grad %.3g mem %.0f MB", row["step"], row["loss"], row["ppl"],
                                     row["tok_s"], 100 * row["padding"], row["lr"],
                                     row["grad_norm"], row["peak_mem_mb"])
                        if tc.max_steps and self.main:
                            told = self._log_pace(pace, told)
                        bar.set_postfix(loss=f"{row['loss']:.3f}", tok_s=f"{row['tok_s']:.0f}",
                                        lr=f"{row['lr']:.2g}")
                        log_t, log_tok, log_loss, log_pad, log_n = time.time(), 0, 0.0, 0.0, 0
                    if self.p.step % tc.valid_every == 0:
                        self._validate_and_checkpoint()
                        last_valid_step = self.p.step
                    reason = self._stop_check()
                    if self.stop_reason:  # early stopping: the run is complete, signal or not
                        self.interrupted = False
                        break
                    if reason:
                        self.stop_reason = reason
                        break
                bar.close()
                if self.stop_reason is None:
                    self.p.epoch += 1
                    self.p.batch_in_epoch = 0
            self._tick()
            if self.interrupted:
                self.save()  # interrupted: keep the work, skip the (slow) validation
            elif last_valid_step != self.p.step:
                self._validate_and_checkpoint()
        finally:
            for sig, h in old_handlers.items():
                signal.signal(sig, h)
            if self.tb is not None:
                self.tb.close()
        log.info(f"stopped at step {self.p.step}: {self.stop_reason}")
        return self.p
