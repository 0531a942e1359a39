"""Row-wise max and top-k over long rows (greedy's vocabulary, beam search's K x V candidates),
exact, through block maxima on the CPU.

torch's CPU `max(dim)` and `topk` walk a row of thousands of scores in a scalar loop that keeps
indices, while `amax` over fixed-size blocks is vectorized. On a 2-core Zen 4 (two threads, rows of
8,000 and 8,011 log-probabilities), the max of 64-400 rows took 223-1,392 us with `max(-1)` and
94-298 us here; beam search's top 10 of 5 x 8,000 for 40-200 sentences took 989-5,333 us with
`topk` and 282-1,975 us here. The k blocks with the largest maxima hold the k largest values (a
value outside them has k block maxima at least as large above it), so searching only those blocks
returns the same values; for the max also the same index (the first, as `torch.max`). Which of
several equal values top-k returns is unspecified, as with `torch.topk`. NaN counts as larger than
any number, as in torch: `amax` and the top-k of the block maxima carry a NaN to its block, and a
row's max is NaN at its first NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor

BLOCK = 64


def _blocks(x: Tensor) -> tuple[Tensor, int]:
    """[R, N] -> the first N // BLOCK whole blocks as [R, N // BLOCK, BLOCK] (a view where each
    row is contiguous, as log-probabilities are), and the width m they cover (columns m.. are
    the tail)."""
    m = x.size(1) - x.size(1) % BLOCK
    return x[:, :m].reshape(x.size(0), m // BLOCK, BLOCK), m


def row_max(x: Tensor) -> tuple[Tensor, Tensor]:
    """`x.max(-1)` of a 2-D tensor: each row's largest value and its first index."""
    if x.device.type != "cpu" or x.size(1) < 4 * BLOCK:
        return x.max(-1)
    blocks, m = _blocks(x)
    best = blocks.amax(-1).argmax(-1)  # the first block holding the row's max
    val, pos = blocks[torch.arange(x.size(0), device=x.device), best].max(-1)
    idx = best * BLOCK + pos
    if m < x.size(1):  # the tail wins only if larger: on a tie the earlier index stays
        tail_val, tail_pos = x[:, m:].max(-1)
        # A NaN beats any number, as in torch.max (`>` is False for it); an earlier NaN stays.
        later = (tail_val > val) | (tail_val.isnan() & ~val.isnan())
        val, idx = torch.where(later, tail_val, val), torch.where(later, tail_pos + m, idx)
    return val, idx


def row_topk(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """`x.topk(k, -1)` of a 2-D tensor: each row's k largest values, largest first, and their
    indices."""
    R, N = x.shape
    if x.device.type != "cpu" or N < 4 * k * BLOCK:
        return x.topk(k, -1)
    blocks, m = _blocks(x)
    top = blocks.amax(-1).topk(k, -1).indices  # [R, k]
    cand = blocks.gather(1, top.unsqueeze(-1).expand(-1, -1, BLOCK)).flatten(1)
    idx = (top.unsqueeze(-1) * BLOCK + torch.arange(BLOCK, device=x.device)).flatten(1)
    if m < N:
        cand = torch.cat([cand, x[:, m:]], 1)
        idx = torch.cat([idx, torch.arange(m, N, device=x.device).expand(R, -1)], 1)
    val, pos = cand.topk(k, -1)
    return val, idx.gather(1, pos)
