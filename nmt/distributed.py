"""torchrun / DistributedDataParallel setup: NCCL on GPU, gloo on CPU; rank 0 writes everything."""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")


def init(device_pref: str = "auto") -> DistInfo:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1); else single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    use_cuda = torch.cuda.is_available() and device_pref != "cpu"
    if world <= 1:
        return DistInfo(device=torch.device("cuda" if use_cuda else "cpu"))
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
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


def cleanup() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
