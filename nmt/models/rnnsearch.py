"""RNNsearch: encoder-decoder with soft alignment (Bahdanau, Cho & Bengio 2014).

    h_j = [h_j^fwd; h_j^bwd]                         bidirectional encoder annotations
    s_0 = tanh(W_s h_1^bwd)                          (one slice per decoder layer)
    e_ij = score(s_{i-1}, h_j);  a_ij = softmax_j(e_ij) over real source positions
    c_i = sum_j a_ij h_j
    s_i = RNN([emb(y_{i-1}); c_i], s_{i-1})
    p(y_i | ...) = softmax(Out([s_i; emb(y_{i-1}); c_i]))   (deep output, then the vocabulary)

score is additive v^T tanh(W s + U h) (bahdanau) or Luong's dot / general; the source-only part
(U h, or W h) is computed once per sentence and kept in the decoder state. With several layers,
the bottom layer reads [emb; c_i], the attention query is the top layer's s_{i-1}.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.models.attention import build_alignment
from nmt.models.base import EncoderOut, NMTModel, State
from nmt.models.dropout import Dropout
from nmt.models.registry import register
from nmt.models.rnn import DeepOutput, gates, make_rnn, run_masked
from nmt.models.rnn_config import RNNSearchConfig


class Cell(nn.Module):
    """One GRU/LSTM layer (PyTorch's equations) whose input term W_x x + b_x the caller supplies,
    so the embedding part of it can be computed for every target step in one matmul."""

    def __init__(self, rnn_type: str, hidden: int) -> None:
        super().__init__()
        self.rnn_type = rnn_type
        self.W_h = nn.Linear(hidden, gates(rnn_type) * hidden)

    def forward(
        self, gx: Tensor, h: Tensor, cell: Optional[Tensor]
    ) -> tuple[Tensor, Optional[Tensor]]:
        gh = self.W_h(h)
        if self.rnn_type == "gru":
            xr, xz, xn = gx.chunk(3, -1)
            hr, hz, hn = gh.chunk(3, -1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            return (1 - z) * n + z * h, None
        i, f, g, o = (gx + gh).chunk(4, -1)
        cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(cell), cell


class RNNSearch(NMTModel):
    # `_step` under the compiler (compile_regions); an unbound function, so that a copy of the
    # model calls it with itself
    _compiled_step: Optional[Callable] = None

    def __init__(self, cfg: RNNSearchConfig, src_vocab: int, tgt_vocab: int) -> None:
        super().__init__()
        E, H, L = cfg.emb_size, cfg.hidden_size, cfg.layers
        Eh = cfg.enc_hidden_size or H // 2
        G = gates(cfg.rnn_type)
        self.rnn_type, self.layers, self.hidden, self.enc_hidden = cfg.rnn_type, L, H, Eh
        self.src_emb = nn.Embedding(src_vocab, E, padding_idx=self.pad_id)
        self.encoder = make_rnn(cfg.rnn_type, E, Eh, L, cfg.dropout, bidirectional=True)
        self.init = nn.Linear(Eh, L * H)  # W_s
        self.align = build_alignment(cfg.attention, H, 2 * Eh, cfg.attention_size or H)
        self.tgt_emb = nn.Embedding(tgt_vocab, E, padding_idx=self.pad_id)
        self.in_y = nn.Linear(E, G * H)  # bottom layer: emb part
        self.in_c = nn.Linear(2 * Eh, G * H, bias=False)  # bottom layer: context part
        self.in_h = nn.ModuleList(nn.Linear(H, G * H) for _ in range(L - 1))  # upper layers
        self.cells = nn.ModuleList(Cell(cfg.rnn_type, H) for _ in range(L))
        self.out = DeepOutput(cfg.deep_output, H + E + 2 * Eh, E, tgt_vocab)
        self.drop = Dropout(cfg.dropout)

    # -- encoder ---------------------------------------------------------------------------
    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOut:
        memory, h_n = run_masked(self.encoder, self.drop(self.src_emb(src)), src_mask)
        h_back = h_n.view(self.layers, 2, *h_n.shape[1:])[-1, 1]  # top layer, backward: h_1
        return EncoderOut(memory, src_mask, final=h_back)

    def init_state(self, enc: EncoderOut) -> State:
        s0 = torch.tanh(self.init(enc.final)).view(-1, self.layers, self.hidden)
        tensors = {
            "h": s0,
            "keys": self.align.keys(enc.memory),
            "memory": enc.memory,
            "mask": enc.mask,
        }
        if self.rnn_type == "lstm":
            tensors["cell"] = torch.zeros_like(s0)
        return State(tensors)

    # -- decoder ---------------------------------------------------------------------------
    def _step(self, gy: Tensor, t: dict) -> tuple[Tensor, Tensor, dict]:
        """One decoder step from s_{i-1} (in t) and the precomputed emb term gy = W_y emb(y_{i-1}).

        Returns c_i [B, 2Eh], a_i [B, S] and the new recurrent tensors (s_i is h[:, -1])."""
        h, cell = t["h"], t.get("cell")
        context, weights = self.align(h[:, -1], t["keys"], t["memory"], t["mask"])
        x, hs, cs = gy + self.in_c(context), [], []
        for l, layer in enumerate(self.cells):
            if l > 0:
                x = self.in_h[l - 1](self.drop(hs[-1]))
            h_l, c_l = layer(x, h[:, l], None if cell is None else cell[:, l])
            hs.append(h_l)
            cs.append(c_l)
        new = {"h": torch.stack(hs, 1)}
        if cell is not None:
            new["cell"] = torch.stack(cs, 1)
        return context, weights, new

    def _features(self, s: Tensor, y: Tensor, context: Tensor) -> Tensor:
        return self.out.features(self.drop(torch.cat([s, y, context], -1)))

    def vocab_projection(self) -> nn.Linear:
        return self.out.proj

    def features(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        state = self.init_state(self.encode(src, src_mask))
        y = self.drop(self.tgt_emb(tgt_in))  # [B, T, E]
        # all steps in one matmul; unbind, not gy[:, i]: each slice's backward would add a
        # zero-filled [B, T, G*H] gradient, T times per batch
        gys = self.in_y(y).unbind(1)
        step = self._compiled_step if self.training and self._compiled_step else type(self)._step
        t, states, contexts = dict(state.tensors), [], []
        for gy in gys:
            context, _, new = step(self, gy, t)
            t.update(new)
            states.append(new["h"][:, -1])
            contexts.append(context)
        # One output projection over all steps.
        return self._features(torch.stack(states, 1), y, torch.stack(contexts, 1))

    def decode_step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        y = self.drop(self.tgt_emb(prev_tokens))  # [B, E]
        context, weights, new = self._step(self.in_y(y), state.tensors)
        logits = self.out.proj(self._features(new["h"][:, -1], y, context))
        return (
            F.log_softmax(logits.float(), dim=-1),
            State({**state.tensors, **new}, state.step + 1),
            weights,
        )

    def compile_regions(self, compile_fn: Callable[[Callable], Callable]) -> bool:
        # one graph for every target length; decoding and validation stay eager
        self._compiled_step = compile_fn(type(self)._step)
        return True

    def matmul_flops_per_token(self, src_len: float, tgt_len: float) -> float:
        E, H, L, Eh = self.src_emb.embedding_dim, self.hidden, self.layers, self.enc_hidden
        G = gates(self.rnn_type)
        enc = src_len * sum(2 * 2 * G * Eh * ((E if l == 0 else 2 * Eh) + Eh) for l in range(L))
        enc += src_len * self.align.flops_keys_per_source_token() + 2 * Eh * L * H
        attn = self.align.flops_per_step(src_len) + 2 * src_len * 2 * Eh  # scores + context
        rnn = 2 * G * H * (E + 2 * Eh + H) + (L - 1) * 2 * G * H * 2 * H
        return enc / tgt_len + attn + rnn + self.out.flops()


@register("rnnsearch", config=RNNSearchConfig)
def build_rnnsearch(cfg: RNNSearchConfig, src_vocab: int, tgt_vocab: int) -> NMTModel:
    return RNNSearch(cfg, src_vocab, tgt_vocab)
