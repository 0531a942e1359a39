"""Decoder-state rows: which sentence (and beam) each row holds, and when to drop done ones.

Finished sentences stop contributing: their rows are masked, and once a quarter of the batch is
done they are dropped from the decoder state with `State.select`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

import torch
from torch import Tensor

if TYPE_CHECKING:
    from nmt.models.base import State


def reorder(state: "State", index: Tensor) -> "State":
    """Beam search's per-step select, whose index only moves rows between the beams of one
    sentence: a state that knows what that spares (the transformer's) does less work."""
    reorder = getattr(state, "reorder", None)
    return state.select(index) if reorder is None else reorder(index)


def expand(state: "State", B: int, K: int, device: torch.device) -> "State":
    """The B sentences' states repeated for their K beams (rows sentence * K + beam): a state
    that can share what is the same for every beam (the transformer's cross-attention) does."""
    expand = getattr(state, "expand_beams", None)
    if expand is not None:
        return expand(K)
    return state.select(torch.arange(B, device=device).repeat_interleave(K))


def take(x: Tensor, index: Tensor) -> Tensor:
    """x [b, K, ...], index [b, M] -> [b, M, ...]: per-sentence gather along the beam axis."""
    return x[torch.arange(x.size(0), device=x.device).unsqueeze(1), index]


def beam_rows(sent: Tensor, beam: Tensor | int) -> Tensor:
    """Flat decoder-state rows of (sentence, beam) pairs: sent [b] x beam [b, K] or an int K."""
    if isinstance(beam, int):
        beam = torch.arange(beam, device=sent.device).expand(sent.numel(), beam)
    return (sent.unsqueeze(1) * beam.size(1) + beam).reshape(-1)


def should_compact(done: Tensor) -> tuple[bool, bool]:
    """(all done, worth dropping the done rows): the one host sync per step."""
    n_done = int(done.sum())
    return n_done == done.numel(), 4 * n_done >= done.numel() and n_done > 0


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Decode without dropout, then restore the caller's train/eval mode."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def length_batches(order: list[int], lengths: list[int], budget: int) -> Iterator[list[int]]:
    """Cut `order` (longest first) into batches of at most `budget` padded source tokens."""
    batch: list[int] = []
    for i in order:
        if batch and (len(batch) + 1) * lengths[batch[0]] > budget:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch
