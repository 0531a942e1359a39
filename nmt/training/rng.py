"""Random generator state: seeding, per-rank seeds, and the states a checkpoint carries so a
resumed run draws the same dropout masks and shuffles as an uninterrupted one."""

from __future__ import annotations

import random

import numpy as np
import torch


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
