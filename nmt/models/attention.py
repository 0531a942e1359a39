"""Attention modules shared by the architectures.

RNN alignment models (Bahdanau et al. 2014; Luong et al. 2015) split their work in two so that the
part that depends only on the source is computed once per sentence:

    keys = attn.keys(memory)                    [B, S, K]  once, in init_state
    context, weights = attn(query, keys, memory, mask)     every decoder step

`MultiHeadAttention` is the transformer's: fused SDPA for teacher forcing, explicit softmax weights
(plus a key/value cache) for step-by-step decoding.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.models.dropout import byte_dropout


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last dim with exactly 0 weight where mask is False (no NaN if all False)."""
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.masked_fill(~mask, 0.0)


class Alignment(nn.Module):
    """Base class: score(query [B, Q], keys [B, S, K]) -> [B, S]; context = weights @ memory."""

    def keys(self, memory: Tensor) -> Tensor:
        raise NotImplementedError

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(
        self, query: Tensor, keys: Tensor, memory: Tensor, mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        weights = masked_softmax(self.score(query, keys), mask)  # [B, S]
        context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)  # [B, D]
        return context, weights

    def flops_per_step(self, src_len: float) -> float:
        """Matmul FLOPs of one decoder step (query projection, scores; context is 2*S*D extra)."""
        raise NotImplementedError

    def flops_keys_per_source_token(self) -> float:
        raise NotImplementedError


class _SigmoidScore(torch.autograd.Function):
    """e = v^T tanh(k + q) over [B, S, A], given k2 = 2k and q2 = 2q, computed as
    2 v^T sigmoid(k2 + q2) - sum(v) (tanh(x) = 2 sigmoid(2x) - 1, exact): three passes over
    [B, S, A] forward (add, sigmoid in place, v^T) where autograd's composition took six."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, k2: Tensor, q2: Tensor, v: Tensor) -> Tensor:
        s = torch.add(k2, q2.unsqueeze(1)).sigmoid_()  # [B, S, A]
        ctx.save_for_backward(s, v)
        e = torch.mm(s.view(-1, s.size(-1)), v.unsqueeze(1)).view(s.shape[:-1])
        return e.mul_(2).sub_(v.sum())

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, de: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        s, v = ctx.saved_tensors
        dz = torch.ops.aten.sigmoid_backward(de.unsqueeze(-1) * (2 * v), s)  # d e / d (k2 + q2)
        dv = torch.mm(s.view(-1, s.size(-1)).t(), de.reshape(-1, 1)).squeeze(1)
        return dz, dz.sum(1), dv.mul_(2).sub_(de.sum())


class AdditiveAttention(Alignment):
    """e_ij = v^T tanh(W s_{i-1} + U h_j) (Bahdanau et al. 2014); U h_j is `keys`.

    On a CPU `keys` holds 2 U h_j in fp32 and the score runs as `_SigmoidScore`, in fp32 even
    under bf16 autocast: it is elementwise work over [B, S, A] at every target step, which torch's
    CPU kernels do faster in fp32 than in bf16 (an add took half the time on a Zen 4), and its
    tanh through the sigmoid (one thread, a million fp32 values: `torch.tanh` 3.2 ms,
    `torch.sigmoid` 0.4 ms). Elsewhere the textbook composition."""

    def __init__(self, query_size: int, memory_size: int, attn_size: int) -> None:
        super().__init__()
        self.W = nn.Linear(query_size, attn_size, bias=False)
        self.U = nn.Linear(memory_size, attn_size)
        self.v = nn.Linear(attn_size, 1, bias=False)

    def keys(self, memory: Tensor) -> Tensor:
        keys = self.U(memory)
        if keys.device.type != "cpu":
            return keys
        return (keys if keys.dtype == torch.float64 else keys.float()) * 2

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        if keys.device.type == "cpu":
            v = self.v.weight
            v = v().dequantize() if callable(v) else v  # an int8 copy's weight is a method
            q2, v = self.W(query).to(keys.dtype) * 2, v[0].to(keys.dtype)
            return _SigmoidScore.apply(keys, q2, v)
        return self.v(torch.tanh(keys + self.W(query).unsqueeze(1))).squeeze(-1)

    def flops_per_step(self, src_len: float) -> float:
        a, q = self.W.out_features, self.W.in_features
        return 2 * q * a + 2 * src_len * a

    def flops_keys_per_source_token(self) -> float:
        return 2 * self.U.in_features * self.U.out_features


class DotAttention(Alignment):
    """e_ij = s^T h_j (Luong dot). With sizes that differ, h_j is first projected to the query size,
    which makes it the same function as `GeneralAttention`."""

    def __init__(self, query_size: int, memory_size: int) -> None:
        super().__init__()
        self.proj = (
            nn.Linear(memory_size, query_size, bias=False) if memory_size != query_size else None
        )
        self.query_size = query_size

    def keys(self, memory: Tensor) -> Tensor:
        return memory if self.proj is None else self.proj(memory)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return torch.bmm(keys, query.unsqueeze(-1)).squeeze(-1)

    def flops_per_step(self, src_len: float) -> float:
        return 2 * src_len * self.query_size

    def flops_keys_per_source_token(self) -> float:
        return 0.0 if self.proj is None else 2 * self.proj.in_features * self.proj.out_features


class GeneralAttention(DotAttention):
    """e_ij = s^T W h_j (Luong general); W h_j is `keys`, computed once per sentence."""

    def __init__(self, query_size: int, memory_size: int) -> None:
        super().__init__(query_size, memory_size)
        self.proj = nn.Linear(memory_size, query_size, bias=False)


def build_alignment(kind: str, query_size: int, memory_size: int, attn_size: int) -> Alignment:
    if kind == "bahdanau":
        return AdditiveAttention(query_size, memory_size, attn_size)
    if kind == "luong_dot":
        return DotAttention(query_size, memory_size)
    if kind == "luong_general":
        return GeneralAttention(query_size, memory_size)
    raise ValueError(f"unknown attention {kind!r}")


# ----------------------------------------------------------------------------------------------
# Transformer


def attend_mask(key_mask: Tensor) -> Tensor:
    """[B, S] key mask -> [B, 1, 1, S] SDPA mask; an all-pad row may attend everywhere (finite
    output that nobody reads) instead of producing NaN."""
    key_mask = key_mask | ~key_mask.any(-1, keepdim=True)
    return key_mask[:, None, None, :]


PLAIN_MAX_POSITIONS = 128  # beyond this many queries or keys fp32 flash attention ran faster


def low_precision_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], causal: bool, dropout: float
) -> Tensor:
    """Attention for bf16 (or fp16) q, k, v on a CPU, where torch's fused flash attention is slow
    in bf16 (forward and backward 1.5-3.9x slower than in fp32 on an AVX512-BF16 Zen 4).

    Up to PLAIN_MAX_POSITIONS queries and keys: softmax(q k^T / sqrt(d_head) + bias) v as plain
    ops, both products in bf16 and the softmax in fp32, the mask an additive 0/-inf bias on the
    fp32 scores (unlike masked_fill, free in the backward pass). With d_head 32 this ran 1.2-1.9x
    faster than fp32 flash attention at 33-66 positions and 1.1-1.2x at 128, at the cost of
    keeping the [B, heads, L, S] weights for the backward. Longer: flash attention in fp32,
    which was faster at 256 positions and keeps no weights. mask: [B, 1, 1, S] bool, True where
    a query may attend."""
    if max(q.size(-2), k.size(-2)) > PLAIN_MAX_POSITIONS:
        with torch.autocast("cpu", enabled=False):
            out = F.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), attn_mask=mask, is_causal=causal, dropout_p=dropout
            )
        return out.to(q.dtype)
    if causal:
        L = q.size(-2)
        mask = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
    scores = torch.matmul(q * q.size(-1) ** -0.5, k.transpose(-1, -2)).float()
    if mask is not None:
        bias = torch.zeros(mask.shape, device=q.device).masked_fill_(~mask, float("-inf"))
        scores = scores.add_(bias)
    weights = byte_dropout(torch.softmax(scores, dim=-1), dropout)
    return weights.to(v.dtype) @ v


def joint_linear(x: Tensor, layers: tuple[nn.Linear, ...]) -> tuple[Tensor, ...]:
    """(layer(x) for layer in layers) as one matmul over their stacked weights: under autocast
    x is cast to bf16 once, not once per layer, and the backward pass runs one product for x's
    gradient instead of one per layer and their sum. The parameters stay separate (checkpoints,
    exporters and importers see the same layers). Layers whose weight is not a tensor (an int8
    copy's) run one by one."""
    if not all(isinstance(lin.weight, Tensor) and lin.bias is not None for lin in layers):
        return tuple(lin(x) for lin in layers)
    weight = torch.cat([lin.weight for lin in layers])
    bias = torch.cat([lin.bias for lin in layers])
    return F.linear(x, weight, bias).split([lin.out_features for lin in layers], dim=-1)


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over `heads` heads (Vaswani et al. 2017)."""

    def __init__(self, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.d_head = heads, d_model // heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.o = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def split(self, x: Tensor) -> Tensor:
        """[B, L, D] -> [B, heads, L, d_head]."""
        return x.view(x.size(0), x.size(1), self.heads, self.d_head).transpose(1, 2)

    def merge(self, x: Tensor) -> Tensor:
        """[B, heads, L, d_head] -> [B, L, D]."""
        return x.transpose(1, 2).reshape(x.size(0), x.size(2), self.heads * self.d_head)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.split(self.k(x)), self.split(self.v(x))

    def forward(
        self, x: Tensor, kv: Tensor, mask: Optional[Tensor] = None, causal: bool = False
    ) -> Tensor:
        """Teacher forcing: fused attention. mask: [B, 1, 1, S] bool (True = may attend)."""
        if x is kv:  # self-attention: q, k and v in one product
            q, k, v = map(self.split, joint_linear(x, (self.q, self.k, self.v)))
        else:
            q, (k, v) = self.split(self.q(x)), map(self.split, joint_linear(kv, (self.k, self.v)))
        dropout = self.dropout if self.training else 0.0
        if q.device.type == "cpu" and q.dtype in (torch.bfloat16, torch.float16):
            out = low_precision_attention(q, k, v, mask, causal, dropout)
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=causal, dropout_p=dropout
            )
        return self.o(self.merge(out))

    def step(
        self, x: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor] = None, group: int = 1
    ) -> tuple[Tensor, Tensor]:
        """One query position x [R, 1, D] against cached k, v [R / group, heads, S, d_head]
        (contiguous or a prefix view of a longer buffer: no copy either way): each run of
        `group` rows of x (a sentence's beams) shares one row of keys and values, and its
        queries go through one matmul.

        bias [R / group, 1, 1, S] is added to the scores: 0 where attended, -inf at padding
        (every row with at least one 0). Returns the output [R, 1, D] and the weights
        [R, heads, S], computed explicitly so that decoding can report them.
        """
        (R, _, D), b = x.shape, k.size(0)
        q = self.q(x).view(b, group, self.heads, self.d_head).transpose(1, 2)  # [b, h, g, dh]
        scores = torch.matmul(q, k.transpose(-1, -2)).div_(math.sqrt(self.d_head))
        if bias is not None:
            scores = scores.add_(bias)  # [b, h, g, S]
        weights = torch.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(R, 1, D)
        return self.o(out), weights.transpose(1, 2).reshape(R, self.heads, -1)
