"""One optimiser step: the model wrapped for DDP and compilation, the optimiser, and the step's
forward, backward, one device -> host read, and update."""

from __future__ import annotations

import inspect
import logging
from contextlib import nullcontext
from typing import Any, Callable, Optional, Protocol

import torch

from nmt.config import Config, TrainConfig
from nmt.data.batching import Batch
from nmt.errors import NmtError
from nmt.models.base import NMTModel, host_lengths
from nmt.training.compile import (
    EagerFallback,
    compile_module,
    should_compile,
    with_eager_fallback,
)
from nmt.training.distributed import DistInfo, all_reduce_sum_
from nmt.training.rng import rank_seed, seed_everything
from nmt.training.schedule import Schedule
from nmt.training.stop_agreement import StopAgreement
from nmt.training.stopping import oom_advice

log = logging.getLogger("nmt")


class Optimised(Protocol):
    """What a step updates and a checkpoint stores (the trainer holds them)."""

    model: NMTModel
    net: torch.nn.Module  # the model, or its DDP / compiled wrapper
    opt: torch.optim.Optimizer
    sched: Schedule
    scaler: torch.amp.GradScaler


def wrap_model(
    model: NMTModel, tc: TrainConfig, dist: DistInfo, arch: str, dynamic: bool = True
) -> torch.nn.Module:
    """The module the steps run: the model under DDP with several ranks, compiled where
    `train.compile` says (nmt.training.compile); with static shapes when not `dynamic`
    (batches of a few fixed shapes, `data.shapes`)."""
    net: torch.nn.Module = model
    if dist.world > 1:
        # Parameters start equal on every rank (DDP broadcasts rank 0's); dropout differs.
        seed_everything(rank_seed(tc.seed, dist.rank))
        # The only buffers are constant (the sinusoid table): nothing to broadcast per step.
        ddp = torch.nn.parallel.DistributedDataParallel
        no_sync = (
            {"forward_sync_buffers": False}  # its newer name (torch >= 2.12)
            if "forward_sync_buffers" in inspect.signature(ddp).parameters
            else {"broadcast_buffers": False}
        )
        cuda = dist.device.type == "cuda"
        net = ddp(net, device_ids=[dist.local_rank] if cuda else None, **no_sync)
    if should_compile(tc.compile, dist.device, arch):
        if model.compile_regions(lambda fn: _compile_region(fn, tc, dist, dynamic)):
            log.info("compile: one decoder step a graph; the loop over target steps runs eager")
            return net
        # compiled around DDP, so that DDP's bucketed all-reduces overlap the backward pass
        compiled = compile_module(net, dynamic, dist.device.type)
        net = compiled if tc.compile is True else EagerFallback(compiled, net)
    elif not dynamic:
        log.warning(
            "warning: data.shapes pads every batch to a fixed shape for a compiled step, but "
            "this step runs eager (train.compile); data.shapes: 0 pads less"
        )
    return net


def _compile_region(fn: Callable, tc: TrainConfig, dist: DistInfo, dynamic: bool) -> Callable:
    """One region of a model (an RNN decoder's step) compiled, without CUDA graphs: a graph's
    replay would overwrite the previous step's outputs, which the next step still reads."""
    compiled = compile_module(fn, dynamic, dist.device.type, cuda_graphs=False)
    return compiled if tc.compile is True else with_eager_fallback(compiled, fn)


def make_optimizer(model: NMTModel, tc: TrainConfig, device: torch.device) -> Any:
    """Adam(W) with torch's fused kernel on every device: one pass over all parameters. On a
    CPU the default is a Python loop of five ops per parameter tensor (about a tenth of a
    Transformer step on 2 cores, benchmarks/ab_step.py); the fused kernel does each tensor's
    update in one pass."""
    opt_cls = torch.optim.AdamW if tc.optimizer == "adamw" else torch.optim.Adam
    return opt_cls(
        model.parameters(),
        lr=tc.lr,
        betas=tuple(tc.betas),
        weight_decay=tc.weight_decay,
        fused=device.type in ("cuda", "cpu"),
    )


class StepRunner:
    """Runs optimiser steps of `parts`. `forward_loss(batch)` is the batch's summed loss;
    `minutes()` the run's training minutes, asked only when the ranks agree on stopping."""

    def __init__(
        self,
        parts: Optimised,
        cfg: Config,
        dist: DistInfo,
        forward_loss: Callable[[Batch], torch.Tensor],
        stops: StopAgreement,
        position: Callable[[], tuple[int, int, float]],
    ) -> None:
        self.parts, self.cfg, self.tc, self.dist = parts, cfg, cfg.train, dist
        self.device = dist.device
        self.forward_loss, self.stops, self.position = forward_loss, stops, position

    def run(self, batches: list[Batch], step: int) -> Optional[dict]:
        """Optimiser step `step + 1` over `accum_steps` batches; None when the loss was not
        finite, {"skipped": "scaler"} when the fp16 GradScaler found an overflow, {"oom": True,
        ...} when a single process ran out of CUDA memory.

        The host reads the device once per step, after the backward pass (see `_read`).
        The loss is normalised by the token count of all ranks."""
        p = self.parts
        p.net.train()
        lr = p.sched.lr(step + 1)
        for g in p.opt.param_groups:
            g["lr"] = lr
        n_local = sum(b.n_tokens for b in batches)
        n_all, scale = self._token_scale(n_local)
        loss_sum = self._backward(batches, scale)
        if loss_sum is None:
            return {"oom": True, "tokens": sum(b.n_slots for b in batches)}
        p.scaler.unscale_(p.opt)
        clip = self.tc.clip_grad if self.tc.clip_grad > 0 else float("inf")
        gnorm = torch.nn.utils.clip_grad_norm_(p.model.parameters(), clip)
        total_loss, bad_loss, bad_grad, n_tok = self._read(loss_sum, gnorm, n_all, n_local)
        if bad_loss or bad_grad:
            p.opt.zero_grad(set_to_none=True)
            p.scaler.update()  # an overflow lowers the fp16 scale (no-op when disabled)
            if not bad_loss and p.scaler.is_enabled():
                return {"skipped": "scaler"}
            return None
        p.opt.step()  # (unscaled above; the finite check above replaces scaler.step's)
        p.scaler.update()
        p.opt.zero_grad(set_to_none=True)
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
        p = self.parts
        loss_sum = torch.zeros((), device=self.device)
        try:
            for i, b in enumerate(batches):
                # known on the host: a packing RNN then needs no device read
                cpu = b.src_mask.device.type == "cpu"
                lengths = host_lengths(b.src_mask.sum(1)) if cpu else nullcontext()
                b = b.to(self.device)
                sync = self.dist.world == 1 or i == len(batches) - 1
                with nullcontext() if sync else p.net.no_sync(), lengths:  # type: ignore[operator]
                    # A non-finite loss still runs backward (under DDP every rank must take
                    # part in the all-reduce); the step is dropped on all ranks afterwards.
                    loss = self.forward_loss(b)
                    p.scaler.scale(loss * scale).backward()
                loss_sum += loss.detach()
        except torch.cuda.OutOfMemoryError:
            if self.dist.world > 1:
                # the other ranks are waiting in a gradient all-reduce: skipping is not possible
                raise NmtError(
                    f"out of memory on a batch of {sum(b.n_slots for b in batches)} "
                    f"padded tokens: {oom_advice(self.cfg)}"
                ) from None
            p.opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            return None
        return loss_sum

    def _read(
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
        code = self.stops.local_code(*self.position())
        flags = torch.tensor([float(code == 2), float(code == 1)]).to(
            self.device, non_blocking=True
        )
        read = torch.cat([all_reduce_sum_(torch.cat([stats, flags])), n_all]).tolist()
        self.stops.heard(2 if read[3] > 0 else int(read[4] > 0), code)
        return read[0], read[1], read[2], read[5]
