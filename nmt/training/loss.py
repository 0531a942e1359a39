"""Token cross-entropy for training: from logits, or fused with the vocabulary projection.

A batch's logits are its largest activation ([tokens, vocab]: 64 MB in fp32 for 2,000 tokens
and 8,000 subwords, 3.2 GB for 25,000 tokens and 32,000), and autograd keeps the
log-probabilities and then their gradient beside them. `projected_cross_entropy` computes the
loss and its gradients a chunk of tokens at a time in the forward pass, so no more than
[chunk, vocab] is ever held, and its backward only scales the stored gradients: the same three
matmuls as autograd's, none repeated.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.data.tokenizer import PAD

# Logits per chunk: 16 MB in fp32 on a CPU; a GPU wants fewer, larger matmuls.
CHUNK_ELEMENTS = {"cpu": 1 << 22, "cuda": 1 << 26}


def token_cross_entropy(logits: Tensor, target: Tensor, smoothing: float) -> Tensor:
    """Summed token cross-entropy in fp32 (padding ignored)."""
    return F.cross_entropy(
        logits.float().reshape(-1, logits.size(-1)),
        target.reshape(-1),
        ignore_index=PAD,
        label_smoothing=smoothing,
        reduction="sum",
    )


def _chunk_loss(logits: Tensor, target: Tensor, smoothing: float, grad: bool):
    """Summed loss of one chunk of fp32 logits and, with `grad`, d loss / d logits (in place of
    the logits): softmax - (1 - smoothing) * one_hot - smoothing / V, zero on padding."""
    keep = target != PAD
    logp = logits.log_softmax(-1)
    y = target.unsqueeze(1)
    nll = -logp.gather(1, y).squeeze(1)
    loss = (1 - smoothing) * nll
    if smoothing:
        loss = loss - smoothing * logp.mean(-1)
    loss = loss.masked_fill(~keep, 0).sum()
    if not grad:
        return loss, None
    g = logp.exp_()
    g[torch.arange(g.size(0), device=g.device), target] -= 1 - smoothing  # one entry a row
    if smoothing:
        g.sub_(smoothing / g.size(1))
    g[~keep] = 0  # padding rows only: a pass over the few, not a masked pass over all
    return loss, g


def _chunked(
    features: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    target: Tensor,
    smoothing: float,
    grad: bool,
):
    """The summed loss of features [N, F] through the projection, a chunk of rows at a time,
    and, with `grad`, the fp32 gradients of the loss for features, weight and bias (None for
    an absent bias); without, None."""
    f32 = dict(dtype=torch.float32, device=features.device)
    loss = torch.zeros((), **f32)
    if grad:
        grad_f = torch.empty(features.shape, **f32)
        grad_w = torch.zeros(weight.shape, **f32)
        grad_b = None if bias is None else torch.zeros(bias.shape, **f32)
    rows = max(1, CHUNK_ELEMENTS.get(features.device.type, 1 << 22) // weight.size(0))
    # Under autocast the matmuls run in its dtype, as autograd's would. Each chunk of features
    # and of gradients is cast once here, where autocast would cast it for each matmul.
    device = features.device.type
    low = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    for s in range(0, features.size(0), rows):
        f, y = features[s : s + rows], target[s : s + rows]
        f = f if low is None else f.to(low)
        part, g = _chunk_loss(F.linear(f, weight, bias).float(), y, smoothing, grad)
        loss += part
        if grad:
            if grad_b is not None:
                grad_b += g.sum(0)  # in fp32
            g = g if low is None else g.to(low)
            grad_f[s : s + rows] = g @ weight
            grad_w += g.t() @ f
    return loss, ((grad_f, grad_w, grad_b) if grad else None)


class _ProjectedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features, weight, bias, target, smoothing):  # type: ignore[override]
        loss, (grad_f, grad_w, grad_b) = _chunked(features, weight, bias, target, smoothing, True)
        ctx.save_for_backward(grad_f, grad_w, *(() if grad_b is None else (grad_b,)))
        ctx.dtypes = (features.dtype, weight.dtype, None if bias is None else bias.dtype)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):  # type: ignore[override]
        grads = [g.mul(grad_loss) for g in ctx.saved_tensors]
        f_type, w_type, b_type = ctx.dtypes
        grad_b = grads[2].to(b_type) if b_type is not None else None
        return grads[0].to(f_type), grads[1].to(w_type), grad_b, None, None


def projected_cross_entropy(
    features: Tensor, projection: nn.Linear, target: Tensor, smoothing: float
) -> Tensor:
    """`token_cross_entropy(projection(features), target, smoothing)`, computed a chunk of
    tokens at a time: features [..., F], target [...]. Not for fp16 training: its gradients
    need the loss scale, which is only known in the backward pass."""
    f, y = features.reshape(-1, features.size(-1)), target.reshape(-1)
    weight, bias = projection.weight, projection.bias
    if torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (features, weight, bias)
    ):
        return _ProjectedCrossEntropy.apply(f, weight, bias, y, smoothing)
    return _chunked(f, weight, bias, y, smoothing, False)[0]
