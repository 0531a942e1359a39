"""Dropout whose mask comes from random bytes: about twice as fast as nn.Dropout on CPU.

torch's CPU dropout draws one float per element (bernoulli_), which costs as much as a matmul of
a small transformer layer. Here 8 mask bytes come from each 64-bit random integer and an element
is kept when its byte >= round(256 p): the drop probability is p rounded to a multiple of 1/256
and kept values are scaled by the exact inverse keep rate, so expectations are unchanged. The
bytes come from torch's generator, so seeding and resume stay exact.

On a GPU the trick loses (several kernels and a full-size mask, where F.dropout is one fused
kernel), so everywhere but the CPU this is plain F.dropout. In a compiled CPU step the mask is
drawn by an op of its own (`nmt::byte_keep_mask`), which the compiler calls as it is: its own
dropout draws one Philox number per element inside the fused kernels, which took about 45% of
a compiled Transformer step (docs/performance.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@torch.library.custom_op(
    "nmt::byte_keep_mask", mutates_args=(), tags=(torch.Tag.nondeterministic_seeded,)
)
def byte_keep_mask(x: Tensor, cut: int) -> Tensor:
    """`keep_mask` as an op of its own: a compiled step calls it as it is instead of drawing
    one random number per element inside its kernels (the compiler's own dropout)."""
    return keep_mask(x, cut)


@byte_keep_mask.register_fake
def _(x: Tensor, cut: int) -> Tensor:
    return torch.empty(x.shape, dtype=torch.bool, device=x.device)


def keep_mask(x: Tensor, cut: int) -> Tensor:
    """True where an element of x is kept: its random byte >= cut (one 64-bit draw per 8)."""
    n = x.numel()
    words = torch.randint(-(2**63), 2**63 - 1, ((n + 7) // 8,), dtype=torch.int64, device=x.device)
    return words.view(torch.uint8)[:n].view(x.shape) >= cut


def byte_dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    if not training or p <= 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    cut = round(256 * p)
    if cut >= 256:
        return torch.zeros_like(x)
    compiled = torch.compiler.is_compiling()
    keep = byte_keep_mask(x.detach(), cut) if compiled else keep_mask(x, cut)
    return x * (keep * (256.0 / (256 - cut))).to(x.dtype)


class Dropout(nn.Module):
    """Drop-in for nn.Dropout (same `p`, same train/eval behaviour)."""

    def __init__(self, p: float = 0.1) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return byte_dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
