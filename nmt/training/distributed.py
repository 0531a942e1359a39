"""torchrun / DistributedDataParallel setup: NCCL on GPU, gloo on CPU; rank 0 writes everything."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from nmt.errors import NmtError


@dataclass
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")


def init(device_pref: str = "auto", timeout_minutes: float = 30.0) -> DistInfo:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1); else single process.

    `timeout_minutes` bounds every collective, including the barrier the other ranks wait in
    while rank 0 validates (NCCL's own default, 10 minutes, kills long validations)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if device_pref == "cuda" and not torch.cuda.is_available():
        raise NmtError("'train.device: cuda' but no CUDA device is available")
    use_cuda = torch.cuda.is_available() and device_pref != "cpu"
    if world <= 1:
        return DistInfo(device=torch.device("cuda" if use_cuda else "cpu"))
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        gpus = torch.cuda.device_count()
        if local >= gpus:
            nproc = os.environ.get("LOCAL_WORLD_SIZE", str(local + 1))
            raise NmtError(
                f"torchrun --nproc_per_node={nproc} starts more processes than this "
                f"machine has GPUs ({gpus}); use --nproc_per_node={gpus} or at most "
                f"one process per GPU (or 'train.device: cpu' for gloo on CPU)"
            )
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(
            backend="nccl" if use_cuda else "gloo", timeout=timedelta(minutes=timeout_minutes)
        )
    device = torch.device("cuda", local) if use_cuda else torch.device("cpu")
    return DistInfo(rank, world, local, device)


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def all_reduce_max(value: int, device: torch.device) -> int:
    """The largest `value` over all ranks (every rank gets the same answer)."""
    t = torch.tensor([float(value)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def all_reduce_flag(flag: bool, device: torch.device) -> bool:
    """True on every rank if `flag` is True on any rank."""
    return all_reduce_max(int(flag), device) > 0


def all_reduce_sum_(t: torch.Tensor) -> torch.Tensor:
    """Sum `t` over all ranks in place, without waiting on the host (no device sync)."""
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_gather_objects(obj: Any, world: int) -> list:
    """Every rank's `obj`, in rank order (a collective: all ranks must call it)."""
    if world <= 1 or not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list = [None] * world
    dist.all_gather_object(out, obj)
    return out


def cleanup() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
