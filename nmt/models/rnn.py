"""Pieces shared by the two RNN architectures (seq2seq and rnnsearch): the recurrent layers, a
padding-safe packed run, and the deep output layer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.config import ModelConfig, opt


@dataclass
class RNNConfig(ModelConfig):
    """Keys both RNN architectures (seq2seq, rnnsearch) have."""
    rnn_type: Literal["gru", "lstm"] = opt("gru", "recurrent cell")
    emb_size: int = opt(256, "embedding size", lo=1)
    hidden_size: int = opt(512, "decoder hidden size (seq2seq: the encoder's too)", lo=1)
    deep_output: Literal["maxout", "tanh", "none"] = opt(
        "maxout", "deep output layer before the softmax")


def gates(rnn_type: str) -> int:
    """Gate blocks per hidden unit: GRU r, z, n; LSTM i, f, g, o."""
    return 3 if rnn_type == "gru" else 4


def make_rnn(rnn_type: str, input_size: int, hidden: int, layers: int, dropout: float,
             bidirectional: bool = False) -> nn.RNNBase:
    cls = nn.GRU if rnn_type == "gru" else nn.LSTM
    return cls(input_size, hidden, layers, batch_first=True, bidirectional=bidirectional,
               dropout=dropout if layers > 1 else 0.0)


def run_packed(rnn: nn.RNNBase, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Run `rnn` over the real positions only, so padding never touches the states.

    Returns outputs [B, S, dirs*H] (zeros at pads) and the final hidden states
    [layers*dirs, B, H] (for LSTMs the h part).
    """
    # An all-pad row (length 0) cannot be packed; reading one pad token keeps it finite.
    lengths = mask.sum(1).clamp(min=1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, h_n = rnn(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
    return out, (h_n[0] if isinstance(h_n, tuple) else h_n)


class DeepOutput(nn.Module):
    """Features -> logits through one hidden layer of `size` units (Pascanu et al. 2014):
    maxout (pool 2, as in Cho/Bahdanau), tanh, or none (a single vocabulary projection)."""

    def __init__(self, kind: str, in_size: int, size: int, vocab: int) -> None:
        super().__init__()
        self.kind, self.size = kind, size
        widths = {"maxout": 2 * size, "tanh": size}
        self.hidden = nn.Linear(in_size, widths[kind]) if kind in widths else None
        self.proj = nn.Linear(size if self.hidden is not None else in_size, vocab)

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "maxout":
            h = self.hidden(x)
            x = h.view(*h.shape[:-1], self.size, 2).amax(-1)
        elif self.kind == "tanh":
            x = torch.tanh(self.hidden(x))
        return self.proj(x)

    def flops(self) -> float:
        mods = [self.proj] + ([self.hidden] if self.hidden is not None else [])
        return sum(2.0 * m.in_features * m.out_features for m in mods)
