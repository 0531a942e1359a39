"""The training loop: precision, schedules, validation, early stopping, checkpoints, exact resume.

A plain loop over deterministic token-budget batches. Everything that decides what happens next
(step, epoch, position in the epoch, RNG states, optimiser, schedule, best score, patience) is in
the checkpoint, so a resumed run continues bit-for-bit like an uninterrupted one.
"""

from __future__ import annotations

import inspect
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
from tqdm import tqdm

from nmt.checkpoint import load_checkpoint, model_payload, save_checkpoint, tokenizer_payload
from nmt.config import Config, TrainConfig
from nmt.config.load import to_dict
from nmt.data.batching import Batch, BucketBatcher
from nmt.data.tokenizer import Tokenizer
from nmt.distributed import (
    DistInfo,
    all_gather_objects,
    all_reduce_flag,
    all_reduce_max,
    all_reduce_sum_,
    barrier,
)
from nmt.errors import NmtError
from nmt.loss import projected_cross_entropy, token_cross_entropy
from nmt.models.base import NMTModel, host_lengths
from nmt.precision import autocast_for, cpu_has_bf16, resolve_precision, set_tf32  # noqa: F401
from nmt.run_dir import RunDir
from nmt.stopping import STOP_CODES, Stop, early_stop_reason, oom_advice, stop_decision

log = logging.getLogger("nmt")
# Validation extras (BLEU, chrF) are computed by a function the caller passes in, so training
# never imports decoding or metrics (data flows one way).
ScoreFn = Callable[[NMTModel], dict]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rank_seed(seed: int, rank: int) -> int:
    """Each rank's own seed (rank 0 keeps the run's): different dropout masks on every rank."""
    return seed + 1_000_003 * rank


def rng_state(device: torch.device = torch.device("cpu")) -> dict:
    """This process's generators; on CUDA only its own device's (a list of states for all
    visible GPUs could not be restored on a machine with fewer)."""
    st = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [st[0], st[1].tolist(), st[2], st[3], st[4]],
        "torch": torch.get_rng_state(),
        "cuda": [torch.cuda.get_rng_state(device)] if device.type == "cuda" else [],
    }


def set_rng_state(st: dict, device: torch.device = torch.device("cpu")) -> None:
    random.setstate(st["python"])
    n = st["numpy"]
    np.random.set_state((n[0], np.array(n[1], dtype=np.uint32), n[2], n[3], n[4]))
    torch.set_rng_state(st["torch"])
    if st["cuda"] and device.type == "cuda":
        # one state (this format) or, in older checkpoints, one per visible GPU
        cuda = st["cuda"][device.index or 0] if len(st["cuda"]) > (device.index or 0) else None
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, device)


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
    """Wall-clock seconds per optimiser step in this process (validation included), so a step
    budget (`train.max_steps`) can say up front how long it will take on this machine."""

    def __init__(self, step: int) -> None:
        self.step0, self.t0 = step, time.time()

    def eta(self, step: int, total: int) -> tuple[float, float]:
        """(seconds per step so far, seconds left until step `total`)."""
        per = (time.time() - self.t0) / max(step - self.step0, 1)
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

    def row(self, step: int, epoch: int, out: dict, peak_mem_mb: float) -> dict:
        """The metrics.jsonl row of this window, ending with the step that returned `out`."""
        loss = self.loss / self.tokens
        return {
            "step": step,
            "split": "train",
            "epoch": epoch + 1,
            "loss": loss,
            "ppl": math.exp(min(loss, 50)),
            "tok_s": self.tokens / (time.time() - self.start),
            "padding": self.padding / self.batches,
            "lr": out["lr"],
            "grad_norm": float(out["grad_norm"]),
            "peak_mem_mb": peak_mem_mb,
        }


@dataclass
class Progress:
    """What a checkpoint needs to continue exactly where training stopped."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best: Optional[float] = None
    bad_validations: int = 0
    bad_steps_total: int = 0
    scaler_skipped: int = 0  # fp16 steps the GradScaler dropped (an overflow; not a divergence)
    train_seconds: float = 0.0
    history: list = field(default_factory=list)


class Trainer:
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
        self.tokenizer, self.batcher, self.valid_batches = tokenizer, batcher, valid_batches
        self.run, self.dist, self.score_fn = RunDir(run_dir), dist, score_fn
        self.device = dist.device
        self.progress_bar = False  # the CLI turns it on where stderr is a terminal
        self.precision = resolve_precision(self.tc.precision, self.device)
        if self.device.type == "cuda":
            set_tf32(self.tc.tf32)
        self.model = model.to(self.device)
        self.net: torch.nn.Module = self.model
        if dist.world > 1:
            # Parameters start equal on every rank (DDP broadcasts rank 0's); dropout differs.
            seed_everything(rank_seed(self.tc.seed, dist.rank))
            # The only buffers are constant (the sinusoid table): nothing to broadcast per step.
            ddp = torch.nn.parallel.DistributedDataParallel
            no_sync = (
                {"forward_sync_buffers": False}  # its newer name (torch >= 2.12)
                if "forward_sync_buffers" in inspect.signature(ddp).parameters
                else {"broadcast_buffers": False}
            )
            self.net = ddp(
                self.net,
                device_ids=[dist.local_rank] if self.device.type == "cuda" else None,
                **no_sync,
            )
        if self.tc.compile:
            # compiled around DDP, so that DDP's bucketed all-reduces overlap the backward pass
            self.net = torch.compile(self.net)
        opt_cls = torch.optim.AdamW if self.tc.optimizer == "adamw" else torch.optim.Adam
        self.opt = opt_cls(
            self.model.parameters(),
            lr=self.tc.lr,
            betas=tuple(self.tc.betas),
            weight_decay=self.tc.weight_decay,
            fused=True if self.device.type == "cuda" else None,
        )
        self.sched = Schedule(self.tc)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.autocast = autocast_for(self.precision, self.device)
        self._agreed_stop = 0  # the stop code all ranks agreed on in the last step's read
        self._own_stop = 0  # this rank's own code in that read
        self.p = Progress()
        self.stop_reason: Optional[str] = None
        self._clock = time.time()
        self._signal: Optional[str] = None
        self.interrupted = False  # stopped by a signal (on any rank): checkpointed, unfinished
        self.main = dist.rank == 0
        self.tb = self._tensorboard() if self.main else None

    # ---------------------------------------------------------------- bookkeeping
    def _tensorboard(self):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # optional extra
            return None
        return SummaryWriter(str(self.run.tensorboard))

    def _record(self, row: dict) -> None:
        if not self.main:
            return
        with open(self.run.metrics, "a", encoding="utf-8") as f:
            f.write(strict_json(row) + "\n")
        if self.tb is not None:
            for k, v in row.items():
                if isinstance(v, (int, float)) and k != "step":
                    self.tb.add_scalar(f"{row['split']}/{k}", v, row["step"])

    def _higher_is_better(self) -> bool:
        return self.tc.early_stop_metric != "loss"

    def checkpoint_payload(self, rank_rngs: Optional[list] = None) -> dict:
        self._tick()
        rngs = rank_rngs or [rng_state(self.device)]
        return {
            "config": to_dict(self.cfg),
            "model": model_payload(self.net),
            "optimizer": self.opt.state_dict(),
            "schedule": self.sched.state_dict(),
            "scaler": self.scaler.state_dict(),
            "progress": vars(self.p).copy(),
            "step": self.p.step,
            "rng": rngs[0],
            "rng_ranks": rngs,
            "tokenizer": tokenizer_payload(self.tokenizer),
            "params": self.model.num_parameters(),
        }

    def gather_rngs(self) -> list:
        """Every rank's generator states (a collective: all ranks call it)."""
        return all_gather_objects(rng_state(self.device), self.dist.world)

    def save(self, best: bool = False, rngs: Optional[list] = None) -> None:
        """Write a checkpoint (rank 0) holding every rank's generator states; without `rngs`
        this gathers them, so then every rank must call it."""
        rngs = rngs if rngs is not None else self.gather_rngs()
        if not self.main:
            return
        self.run.checkpoints.mkdir(exist_ok=True)
        payload = self.checkpoint_payload(rngs)
        save_checkpoint(self.run.step_checkpoint(self.p.step), payload)
        if best:
            save_checkpoint(self.run.best, payload)
        self.run.prune(self.tc.keep_last)

    def resume(self, path: Path) -> None:
        ck = load_checkpoint(path)
        try:
            self.model.load_state_dict(ck["model"])
        except RuntimeError:
            raise NmtError(
                f"checkpoint {path} does not fit this model (architecture or vocabulary changed?)"
            ) from None
        self.opt.load_state_dict(ck["optimizer"])
        self.sched.load_state_dict(ck["schedule"])
        self.scaler.load_state_dict(ck["scaler"])
        self.p = Progress(**ck["progress"])
        rngs = ck.get("rng_ranks") or [ck["rng"]]
        if self.dist.rank < len(rngs):
            set_rng_state(rngs[self.dist.rank], self.device)
        else:  # more ranks than the run had: a fresh stream for this rank, moved on by the step
            seed_everything(rank_seed(self.tc.seed, self.dist.rank) + self.p.step)
            log.warning(
                f"rank {self.dist.rank}: the checkpoint holds generator states for "
                f"{len(rngs)} rank(s); this rank starts a new one"
            )
        log.info(
            f"resumed from {path} at step {self.p.step} (epoch {self.p.epoch + 1}, "
            f"batch {self.p.batch_in_epoch})"
        )

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
        # fp16 keeps the logits: its gradients need the loss scale, known only in the backward
        with self.autocast:
            return self._loss(self.net, batch, self.tc.label_smoothing, self.precision != "fp16")

    def _decide(self, **facts: Any) -> Optional[Stop]:
        """`stop_decision` on this rank's step and epoch plus the facts given."""
        return stop_decision(self.cfg, step=self.p.step, epoch=self.p.epoch, **facts)

    def _minutes(self) -> float:
        self._tick()
        return self.p.train_seconds / 60

    def _local_stop_code(self) -> int:
        """2: a signal arrived; 1: a limit is reached; 0: go on (this rank's view)."""
        stop = self._decide(signal=self._signal, minutes=self._minutes())
        return 0 if stop is None else STOP_CODES[stop.kind]

    def train_step(self, batches: list[Batch]) -> Optional[dict]:
        """One optimiser step over `accum_steps` batches; None when the loss was not finite,
        {"skipped": "scaler"} when the fp16 GradScaler found an overflow, {"oom": True, ...}
        when a single process ran out of CUDA memory.

        The host reads the device once per step, after the backward pass (see `_read_step`).
        The loss is normalised by the token count of all ranks."""
        self.net.train()
        lr = self.sched.lr(self.p.step + 1)
        for g in self.opt.param_groups:
            g["lr"] = lr
        n_local = sum(b.n_tokens for b in batches)
        n_all, scale = self._token_scale(n_local)
        loss_sum = self._backward(batches, scale)
        if loss_sum is None:
            return {"oom": True, "tokens": sum(b.n_slots for b in batches)}
        self.scaler.unscale_(self.opt)
        gnorm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.tc.clip_grad if self.tc.clip_grad > 0 else float("inf")
        )
        total_loss, bad_loss, bad_grad, n_tok = self._read_step(loss_sum, gnorm, n_all, n_local)
        if bad_loss or bad_grad:
            self.opt.zero_grad(set_to_none=True)
            self.scaler.update()  # an overflow lowers the fp16 scale (no-op when disabled)
            if not bad_loss and self.scaler.is_enabled():
                return {"skipped": "scaler"}
            return None
        self.opt.step()  # (unscaled above; the finite check above replaces scaler.step's)
        self.scaler.update()
        self.opt.zero_grad(set_to_none=True)
        return {
            "loss": total_loss / n_tok,
            "loss_sum": total_loss,
            "tokens": n_tok,
            "lr": lr,
            "grad_norm": gnorm.detach(),
        }

    def _token_scale(self, n_local: int) -> tuple[Optional[torch.Tensor], Any]:
        """(this rank's token count on the device under DDP, the factor of each loss)."""
        if self.dist.world == 1:
            return None, 1.0 / n_local
        # DDP averages over ranks: loss_r * world / N makes it sum_r loss_r / N
        n_all = torch.tensor([float(n_local)]).to(self.device, non_blocking=True)
        return n_all, self.dist.world / all_reduce_sum_(n_all)[0]

    def _backward(self, batches: list[Batch], scale: Any) -> Optional[torch.Tensor]:
        """Forward and backward over the batches; their summed loss, or None when a single
        process ran out of CUDA memory (the batch is then dropped)."""
        loss_sum = torch.zeros((), device=self.device)
        try:
            for i, b in enumerate(batches):
                # known on the host: a packing RNN then needs no device read
                lengths = (
                    host_lengths(b.src_mask.sum(1))
                    if b.src_mask.device.type == "cpu"
                    else nullcontext()
                )
                b = b.to(self.device)
                sync = self.dist.world == 1 or i == len(batches) - 1
                with nullcontext() if sync else self.net.no_sync(), lengths:
                    # A non-finite loss still runs backward (under DDP every rank must take
                    # part in the all-reduce); the step is dropped on all ranks afterwards.
                    loss = self._forward_loss(b)
                    self.scaler.scale(loss * scale).backward()
                loss_sum += loss.detach()
        except torch.cuda.OutOfMemoryError:
            if self.dist.world > 1:
                # the other ranks are waiting in a gradient all-reduce: skipping is not possible
                raise NmtError(
                    f"out of memory on a batch of {sum(b.n_slots for b in batches)} "
                    f"padded tokens: {oom_advice(self.cfg)}"
                ) from None
            self.opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            return None
        return loss_sum

    def _read_step(
        self,
        loss_sum: torch.Tensor,
        gnorm: torch.Tensor,
        n_all: Optional[torch.Tensor],
        n_local: int,
    ) -> tuple[float, ...]:
        """The step's one device -> host read: (loss sum, loss not finite, gradients not finite
        (an fp16 overflow or NaN), tokens), summed over ranks; under DDP the same read tells
        every rank whether any rank must stop."""
        stats = torch.stack(
            [
                loss_sum.float(),
                (~torch.isfinite(loss_sum)).float(),
                (~torch.isfinite(gnorm)).float(),
            ]
        )
        if self.dist.world == 1:
            return (*stats.tolist(), float(n_local))
        code = self._local_stop_code()
        flags = torch.tensor([float(code == 2), float(code == 1)]).to(
            self.device, non_blocking=True
        )
        read = torch.cat([all_reduce_sum_(torch.cat([stats, flags])), n_all]).tolist()
        self._agreed_stop = 2 if read[3] > 0 else int(read[4] > 0)
        self._own_stop = code
        return read[0], read[1], read[2], read[5]

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

    def _skipped(self, out: Optional[dict]) -> bool:
        """Count a skipped step (non-finite loss, fp16 overflow, or CUDA out of memory); after
        `max_bad_steps` of one kind in a row, stop with a clear error instead of going on."""
        if out is not None and out.get("skipped") == "scaler":
            # the GradScaler lowers its scale and tries again; the schedule does not move
            self.p.scaler_skipped += 1
            log.info(
                f"fp16 overflow at step {self.p.step + 1}: step skipped, loss scale now "
                f"{self.scaler.get_scale():g} ({self.p.scaler_skipped} skipped in total)"
            )
            return True
        if out is not None and "oom" not in out:
            self._runs = {"nan": 0, "oom": 0}
            return False
        kind = "nan" if out is None else "oom"
        self._runs[kind] += 1
        n, step = self._runs[kind], self.p.step + 1
        if kind == "nan":
            self.p.bad_steps_total += 1
            log.warning(
                f"non-finite loss at step {step}: step skipped ({n} in a row, "
                f"{self.p.bad_steps_total} in total)"
            )
        else:
            log.warning(
                f"out of memory on a batch of {out['tokens']} padded tokens at step "
                f"{step}: batch skipped"
            )
        stop = self._decide(bad_run=(kind, n))
        if stop is not None and stop.kind == "failed":
            raise NmtError(stop.reason)
        return True

    # ---------------------------------------------------------------- the loop
    def _log_pace(self) -> None:
        """Progress against the step budget; the first time, the expected total time."""
        total = self.tc.max_steps
        per, left = self._pace.eta(self.p.step, total)
        if not self._told:
            log.info(
                f"expected time: about {duration(left)} for the remaining "
                f"{total - self.p.step} of {total} steps ({per:.2f} s/step on this machine "
                f"so far)"
            )
            self._told = True
        log.info(
            f"step {self.p.step}/{total} ({100 * self.p.step / total:.0f}%), "
            f"{per:.2f} s/step, ETA {duration(left)}"
        )

    def _tick(self) -> None:
        """Move wall-clock time since the last tick into progress (so checkpoints carry it)."""
        now = time.time()
        self.p.train_seconds += now - self._clock
        self._clock = now

    def _stop_check(self, after_step: bool = False) -> Optional[str]:
        """Why to stop now, if at all: a signal or a limit. Ranks decide together (the strongest
        reason on any rank wins), so all of them take the same path to the end of the run."""
        if self.dist.world > 1 and after_step:
            return self._agreed_after_step()
        stop = self._decide(signal=self._signal, minutes=self._minutes())
        code, reason = (0, None) if stop is None else (STOP_CODES[stop.kind], stop.reason)
        if self.dist.world > 1:
            agreed = all_reduce_max(code, self.device)
            if agreed > code:
                reason = _elsewhere(agreed)
            code = agreed
        self.interrupted = code == 2
        return reason

    def _agreed_after_step(self) -> Optional[str]:
        """After a step under DDP: the ranks agreed on signals and time budgets in that step's
        read (no extra round trip); the step limit is the same on every rank."""
        if self._agreed_stop == 0:
            stop = self._decide()
            return stop.reason if stop else None
        self.interrupted = self._agreed_stop == 2
        if self._agreed_stop > self._own_stop:
            return _elsewhere(self._agreed_stop)
        stop = self._decide(signal=self._signal, minutes=self._minutes())
        return stop.reason if stop else f"reached max_minutes={self.tc.max_minutes:g}"

    def _validate_and_checkpoint(self) -> None:
        stop = False
        rngs = self.gather_rngs()
        if self.main and not self.valid_batches:
            # no validation data: nothing to compare, so the latest model is the best one
            self.save(best=True, rngs=rngs)
        elif self.main:
            self.save(best=self._validate_and_record(), rngs=rngs)
            decision = self._decide(bad_validations=self.p.bad_validations)
            stop = decision is not None and decision.kind == "patience"
        barrier()
        if self.dist.world > 1:
            stop = all_reduce_flag(stop, self.device)
        if stop:
            self.stop_reason = early_stop_reason(self.tc.patience)

    def _validate_and_record(self) -> bool:
        """Validate (rank 0), update the best score and the schedule, log the row; whether
        this is a new best."""
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
        log.info(
            "valid step %d: %s%s",
            self.p.step,
            ", ".join(
                f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                for k, v in row.items()
                if k not in ("step", "split", "best")
            ),
            " (new best)" if improved else "",
        )
        return improved

    def train(self) -> Progress:
        """Train until a stop reason (`stop_reason`), then validate and checkpoint the end."""
        old_handlers = self._install_signals()
        self._clock = time.time()
        # a checkpoint saved on a signal comes after its run's last validation
        self._last_valid = self.p.history[-1]["step"] if self.p.history else -1
        self._runs = {"nan": 0, "oom": 0}
        self._window = LogWindow()
        self._pace, self._told = Pace(self.p.step), False
        try:
            self.stop_reason = self._stop_check()  # a resumed run may have no budget left
            while self.stop_reason is None:
                self._train_epoch()
            self._tick()
            if self.interrupted:
                self.save()  # interrupted: keep the work, skip the (slow) validation
            elif self._last_valid != self.p.step:
                self._validate_and_checkpoint()
        finally:
            for sig, h in old_handlers.items():
                signal.signal(sig, h)
            if self.tb is not None:
                self.tb.close()
        log.info(f"stopped at step {self.p.step}: {self.stop_reason}")
        return self.p

    def _train_epoch(self) -> None:
        """The rest of the current epoch, until it ends or a stop reason is set."""
        limit = self._decide()  # the epoch and step limits: the same on every rank
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
        if self._skipped(out):
            return
        self.p.step += 1
        self._window.add(out, data)
        if self.p.step % tc.log_every == 0:
            self._log_train(out, bar)
        if self.p.step % tc.valid_every == 0:
            self._validate_and_checkpoint()
            self._last_valid = self.p.step
        reason = self._stop_check(after_step=True)
        if self.stop_reason:  # early stopping: the run is complete, signal or not
            self.interrupted = False
        else:
            self.stop_reason = reason

    def _log_train(self, out: dict, bar: tqdm) -> None:
        row = self._window.row(self.p.step, self.p.epoch, out, peak_memory_mb(self.device))
        self._record(row)
        if self.main:
            log.info(
                "step %d: loss %.4f ppl %.2f %.0f tok/s padding %.1f%% lr %.3g "
                "grad %.3g mem %.0f MB",
                row["step"],
                row["loss"],
                row["ppl"],
                row["tok_s"],
                100 * row["padding"],
                row["lr"],
                row["grad_norm"],
                row["peak_mem_mb"],
            )
        if self.tc.max_steps and self.main:
            self._log_pace()
        bar.set_postfix(
            loss=f"{row['loss']:.3f}", tok_s=f"{row['tok_s']:.0f}", lr=f"{row['lr']:.2g}"
        )
        self._window = LogWindow()


def _elsewhere(code: int) -> str:
    return "interrupted on another rank" if code == 2 else "a limit was reached on another rank"
