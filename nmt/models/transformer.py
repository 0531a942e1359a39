"""Transformer encoder-decoder (Vaswani et al. 2017), pre-norm by default.

    x = dropout(emb(tokens) * sqrt(d_model) + pos)
    encoder layer: x = x + SelfAttn(x);  x = x + FF(x)                 (each with its LayerNorm:
    decoder layer: x = x + CausalSelfAttn(x);  x = x + CrossAttn(x, memory);  x = x + FF(x)
                                                                 pre: x + f(LN(x)); post: LN(x + f(x)))
    logits = W_out LN(x)        (final LayerNorms only with pre-norm)

Teacher forcing uses fused scaled_dot_product_attention. decode_step runs one new position: each
decoder layer keeps its self-attention keys/values in preallocated buffers of the state (written
in place, one position per step, instead of concatenated: a copy of the whole cache per step),
and the cross-attention keys/values of the memory and the padding mask (as an additive bias) are
computed once in init_state, contiguous so that no step copies them again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.errors import NmtError
from nmt.models.attention import MultiHeadAttention, attend_mask
from nmt.models.base import EncoderOut, NMTModel, State
from nmt.models.dropout import Dropout
from nmt.models.registry import register
from nmt.models.transformer_config import TransformerConfig


def sinusoids(length: int, d: int, layout: str = "interleaved") -> Tensor:
    """interleaved: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same);
    halves (Marian): PE[pos, i] = sin(same), PE[pos, ceil(d/2) + i] = cos(same)."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    angle = pos / 10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    pe = torch.zeros(length, d)
    if layout == "halves":
        half = angle.size(1)
        pe[:, :half] = torch.sin(angle)
        pe[:, half:] = torch.cos(angle[:, : d // 2])
    else:
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe


class Positions(nn.Module):
    def __init__(self, kind: str, d: int, max_positions: int, layout: str = "interleaved") -> None:
        super().__init__()
        self.kind, self.d, self.max_positions, self.layout = kind, d, max_positions, layout
        if kind == "learned":
            self.table = nn.Embedding(max_positions, d)
        else:  # a cache, not a parameter: kept out of checkpoints
            self.register_buffer("table", sinusoids(max_positions, d, layout), persistent=False)

    def forward(self, start: int, length: int) -> Tensor:
        """Encodings of positions start .. start+length-1: [length, d]."""
        end = start + length
        if self.kind == "learned":
            if end > self.max_positions:
                raise NmtError(
                    f"sequence of {end} tokens exceeds 'model.max_positions' "
                    f"({self.max_positions}) of this learned-position model"
                )
            return self.table.weight[start:end]
        if end > self.table.size(0):
            return sinusoids(end, self.d, self.layout).to(self.table)[start:]
        return self.table[start:end]


ACTIVATIONS = {"relu": nn.ReLU, "swish": nn.SiLU, "gelu": nn.GELU}


class FeedForward(nn.Sequential):
    def __init__(self, d: int, ff: int, dropout: float, activation: str = "relu") -> None:
        act = ACTIVATIONS[activation]()
        super().__init__(nn.Linear(d, ff), act, Dropout(dropout), nn.Linear(ff, d))


@dataclass(frozen=True)
class LayerShape:
    """What every encoder and decoder layer is built from: TransformerConfig, resolved."""

    d: int
    heads: int
    ff: int
    dropout: float  # on each sublayer's output, before the residual sum
    pre: bool  # pre-norm (norm before each sublayer) or post-norm
    attn_dropout: float
    act: str
    ff_dropout: float  # inside the feed-forward block


class Sublayers(nn.Module):
    """Residual wiring shared by both layer types: `inp` feeds f, `res` adds f's output back."""

    def __init__(self, pre: bool, dropout: float) -> None:
        super().__init__()
        self.pre = pre
        self.drop = Dropout(dropout)

    def inp(self, x: Tensor, norm: nn.LayerNorm) -> Tensor:
        return norm(x) if self.pre else x

    def res(self, x: Tensor, out: Tensor, norm: nn.LayerNorm) -> Tensor:
        x = x + self.drop(out)
        return x if self.pre else norm(x)


class EncoderLayer(Sublayers):
    def __init__(self, s: LayerShape) -> None:
        super().__init__(s.pre, s.dropout)
        self.self_attn = MultiHeadAttention(s.d, s.heads, s.attn_dropout)
        self.ff = FeedForward(s.d, s.ff, s.ff_dropout, s.act)
        self.norm1, self.norm2 = nn.LayerNorm(s.d), nn.LayerNorm(s.d)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = self.inp(x, self.norm1)
        x = self.res(x, self.self_attn(h, h, mask), self.norm1)
        return self.res(x, self.ff(self.inp(x, self.norm2)), self.norm2)


class DecoderLayer(Sublayers):
    def __init__(self, s: LayerShape) -> None:
        super().__init__(s.pre, s.dropout)
        self.self_attn = MultiHeadAttention(s.d, s.heads, s.attn_dropout)
        self.cross_attn = MultiHeadAttention(s.d, s.heads, s.attn_dropout)
        self.ff = FeedForward(s.d, s.ff, s.ff_dropout, s.act)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(s.d), nn.LayerNorm(s.d), nn.LayerNorm(s.d)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor) -> Tensor:
        h = self.inp(x, self.norm1)
        x = self.res(x, self.self_attn(h, h, causal=True), self.norm1)
        x = self.res(x, self.cross_attn(self.inp(x, self.norm2), memory, src_mask), self.norm2)
        return self.res(x, self.ff(self.inp(x, self.norm3)), self.norm3)

    def step(
        self,
        x: Tensor,
        cache_k: Tensor,
        cache_v: Tensor,
        t: int,
        cross_k: Tensor,
        cross_v: Tensor,
        src_bias: Tensor,
        group: int = 1,
    ) -> tuple[Tensor, Tensor]:
        """One new position x [B, 1, d] at step t. Writes its self-attention key and value into
        position t of the caches [B, heads, capacity, d_head] and attends over positions 0..t;
        every `group` rows share one row of cross_k, cross_v and src_bias (a sentence's beams).
        Returns the output and the cross-attention weights [B, heads, S]."""
        h = self.inp(x, self.norm1)
        k, v = self.self_attn.project_kv(h)  # [B, heads, 1, dh]
        cache_k[:, :, t : t + 1] = k
        cache_v[:, :, t : t + 1] = v
        out, _ = self.self_attn.step(h, cache_k[:, :, : t + 1], cache_v[:, :, : t + 1])
        x = self.res(x, out, self.norm1)
        out, weights = self.cross_attn.step(
            self.inp(x, self.norm2), cross_k, cross_v, src_bias, group
        )
        x = self.res(x, out, self.norm2)
        return self.res(x, self.ff(self.inp(x, self.norm3)), self.norm3), weights


CACHES = ("self_k", "self_v")  # per layer [B, heads, capacity, d_head], filled to .step
SPARES = ("spare_k", "spare_v")  # buffers reorder() gathers into (absent until needed)
FIRST_CAPACITY = 32  # positions preallocated at first; doubled when full


def _gather(buf: Tensor, index: Tensor, filled: int, out: Optional[Tensor] = None) -> Tensor:
    """Rows `index` of a cache buffer, only its first `filled` positions copied; into `out` when
    it has the right shape (beam search's spare buffer: no allocation, no page faults)."""
    shape = (index.numel(),) + tuple(buf.shape[1:])
    if out is None or tuple(out.shape) != shape:
        out = buf.new_empty(shape)
    torch.index_select(buf[:, :, :filled], 0, index, out=out[:, :, :filled])
    out.filled = filled  # type: ignore[attr-defined]
    return out


def _writable(bufs: list[Tensor], t: int) -> list[Tensor]:
    """The cache buffers decode_step at step t may write position t of: the same buffers unless
    they are full (copied into ones twice as long) or a decode_step from the same state already
    wrote there (copied, so that decoding twice from one state gives the same results)."""
    first = bufs[0]
    if first.size(2) > t and getattr(first, "filled", t) == t:
        out = bufs
    else:
        cap = first.size(2) if first.size(2) > t else max(2 * first.size(2), t + 1)
        out = []
        for b in bufs:
            new = b.new_empty(b.shape[:2] + (cap,) + b.shape[3:])
            new[:, :, :t] = b[:, :, :t]
            out.append(new)
    for b in out:
        b.filled = t + 1  # type: ignore[attr-defined]
    return out


class TransformerState(State):
    """The transformer's decoder state. Keys: self_k, self_v (CACHES), cross_k, cross_v (per layer
    [B, heads, S, d_head], contiguous), src_bias ([B, 1, 1, S]: 0 where attended, -inf at
    padding) and, after a beam reorder, spare_k, spare_v. After `expand_beams(K)` it holds
    `group` K: the caches have K rows a sentence, cross_k, cross_v and src_bias one, shared by
    the sentence's beams (beam search's keys and values of the source, read once a step
    instead of K times).

    `select` copies only the filled part of the caches. `reorder` is beam search's per-step
    select, whose index moves rows only between the beams of one sentence: the cross-attention
    keys/values and the bias are the same for all beams of a sentence and stay where they are,
    and the caches are gathered into the spare buffers, which then swap with the caches. It
    consumes the state (its old caches become the new spares). A plain State holding the same
    tensors (an Ensemble member's) decodes and selects the same, only slower."""

    def select(self, index: Tensor) -> "TransformerState":
        """Rows `index`; a state expanded for beams (`group` K) selects whole sentences: each
        run of K rows of the index is one sentence's beams, in order."""
        group = self.tensors.get("group", 1)
        return self._regather(index, index if group == 1 else index.view(-1, group)[:, 0] // group)

    def expand_beams(self, K: int) -> "TransformerState":
        """Each sentence's state for K beams: the caches get K rows a sentence, the
        cross-attention keys, values and bias stay one row a sentence (`group` K)."""
        bias = self.tensors["src_bias"]
        rows = torch.arange(len(bias), device=bias.device).repeat_interleave(K)
        return self._regather(rows, None, group=K)

    def _regather(self, rows: Tensor, shared: Optional[Tensor], **extra) -> "TransformerState":
        """A new state: cache rows `rows` (their filled part), rows `shared` of every other
        tensor (None: kept as they are), spares dropped, `extra` entries added."""
        t = self.tensors
        rest = State({k: v for k, v in t.items() if k not in CACHES + SPARES})
        rest = rest if shared is None else rest.select(shared)
        caches = {k: [_gather(b, rows, self.step) for b in t[k]] for k in CACHES}
        return TransformerState({**rest.tensors, **caches, **extra}, self.step)

    def reorder(self, index: Tensor) -> "TransformerState":
        t, new = self.tensors, dict(self.tensors)
        for cache, spare in zip(CACHES, SPARES):
            spares = t.get(spare) or [None] * len(t[cache])
            new[cache] = [_gather(b, index, self.step, s) for b, s in zip(t[cache], spares)]
            new[spare] = t[cache]
        return TransformerState(new, self.step)


class Transformer(NMTModel):
    def __init__(self, cfg: TransformerConfig, src_vocab: int, tgt_vocab: int) -> None:
        super().__init__()
        d, L, pre = cfg.d_model, cfg.layers, cfg.norm == "pre"
        self.d_model, self.heads, self.ff, self.n_layers = d, cfg.heads, cfg.ff, L
        self.tgt_emb = nn.Embedding(tgt_vocab, d, padding_idx=self.pad_id)
        self.src_emb = (
            self.tgt_emb
            if cfg.tie_embeddings
            else nn.Embedding(src_vocab, d, padding_idx=self.pad_id)
        )
        self.positions = Positions(cfg.positions, d, cfg.max_positions, cfg.sinusoid_layout)
        self.emb_scale = math.sqrt(d) if cfg.scale_embeddings else 1.0
        ff_drop = cfg.dropout if cfg.activation_dropout is None else cfg.activation_dropout
        shape = LayerShape(
            d, cfg.heads, cfg.ff, cfg.dropout, pre, cfg.attention_dropout, cfg.activation, ff_drop
        )
        self.encoder = nn.ModuleList(EncoderLayer(shape) for _ in range(L))
        self.decoder = nn.ModuleList(DecoderLayer(shape) for _ in range(L))
        self.enc_norm = nn.LayerNorm(d) if pre else nn.Identity()
        self.dec_norm = nn.LayerNorm(d) if pre else nn.Identity()
        self.out = nn.Linear(d, tgt_vocab, bias=cfg.final_logits_bias)
        self.drop = Dropout(cfg.dropout)
        self._init_weights()
        if self.out.bias is not None:
            nn.init.zeros_(self.out.bias)
        if cfg.tie_output:
            self.out.weight = self.tgt_emb.weight

    def _init_weights(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        # Embeddings are scaled up by sqrt(d), so start them at unit scale after scaling.
        tables = [self.tgt_emb] + ([self.src_emb] if self.src_emb is not self.tgt_emb else [])
        for emb in tables:
            nn.init.normal_(emb.weight, std=self.d_model**-0.5)
            with torch.no_grad():
                emb.weight[self.pad_id].zero_()

    def embed(self, emb: nn.Embedding, tokens: Tensor, start: int = 0) -> Tensor:
        pos = self.positions(start, tokens.size(1))
        return self.drop(emb(tokens) * self.emb_scale + pos)

    # -- encoder ---------------------------------------------------------------------------
    def attention_shape(self) -> tuple[int, int]:
        return self.n_layers, self.heads

    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOut:
        x, mask = self.embed(self.src_emb, src), attend_mask(src_mask)
        for layer in self.encoder:
            x = layer(x, mask)
        return EncoderOut(self.enc_norm(x), src_mask)

    def features(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        enc = self.encode(src, src_mask)
        x, mask = self.embed(self.tgt_emb, tgt_in), attend_mask(src_mask)
        for layer in self.decoder:
            x = layer(x, enc.memory, mask)
        return self.dec_norm(x)

    def vocab_projection(self) -> nn.Linear:
        return self.out

    # -- incremental decoding --------------------------------------------------------------
    def init_state(self, enc: EncoderOut) -> State:
        mem = enc.memory
        (B, S), dh = enc.mask.shape, self.d_model // self.heads
        cross = [
            tuple(x.contiguous() for x in layer.cross_attn.project_kv(mem))
            for layer in self.decoder
        ]
        bias = torch.zeros(B, 1, 1, S, dtype=mem.dtype, device=mem.device).masked_fill(
            ~attend_mask(enc.mask), float("-inf")
        )
        caches = {
            k: [mem.new_empty(B, self.heads, FIRST_CAPACITY, dh) for _ in range(self.n_layers)]
            for k in CACHES
        }
        return TransformerState(
            {
                **caches,
                "cross_k": [k for k, _ in cross],
                "cross_v": [v for _, v in cross],
                "src_bias": bias,
            }
        )

    def decode_step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        """Writes into the state's self-attention caches (see TransformerState)."""
        t = state.step
        x = self.embed(self.tgt_emb, prev_tokens.unsqueeze(1), start=t)  # [B, 1, d]
        cache_k, cache_v = _writable(state["self_k"], t), _writable(state["self_v"], t)
        report = self.attn_layer % self.n_layers
        for l, layer in enumerate(self.decoder):
            x, weights = layer.step(
                x,
                cache_k[l],
                cache_v[l],
                t,
                state["cross_k"][l],
                state["cross_v"][l],
                state["src_bias"],
                state.tensors.get("group", 1),
            )
            if l == report:
                attn = weights.mean(1) if self.attn_head is None else weights[:, self.attn_head]
        logits = self.out(self.dec_norm(x[:, 0])).float()
        # log_softmax into the fresh logits: one [B, V] buffer less per step (same values)
        log_probs = (
            torch.log_softmax(logits, -1, out=logits)
            if not torch.is_grad_enabled()
            else F.log_softmax(logits, dim=-1)
        )
        new = TransformerState({**state.tensors, "self_k": cache_k, "self_v": cache_v}, t + 1)
        return log_probs, new, attn

    def matmul_flops_per_token(self, src_len: float, tgt_len: float) -> float:
        """Dense count: attention scores and contexts over all S (or T) keys, causal or not."""
        d, ff, L, S, T = self.d_model, self.ff, self.n_layers, src_len, tgt_len
        proj, ffn = 2 * d * d, 2 * 2 * d * ff
        enc = S * L * (4 * proj + ffn + 2 * 2 * S * d)  # per sentence
        cross_kv = S * L * 2 * proj  # memory K, V
        dec = L * (4 * proj + 2 * proj + ffn + 2 * 2 * T * d + 2 * 2 * S * d)
        return (enc + cross_kv) / T + dec + 2 * d * self.out.out_features


@register("transformer", config=TransformerConfig)
def build_transformer(cfg: TransformerConfig, src_vocab: int, tgt_vocab: int) -> NMTModel:
    if cfg.tie_embeddings and src_vocab != tgt_vocab:  # the vocabularies, not the config
        raise NmtError(
            f"'model.tie_embeddings' needs one joint vocabulary, but the source has "
            f"{src_vocab} entries and the target {tgt_vocab}"
        )
    return Transformer(cfg, src_vocab, tgt_vocab)
