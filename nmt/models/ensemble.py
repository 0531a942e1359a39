"""An ensemble is one more NMTModel: greedy, beam, sampling and scoring decode it unchanged.

Each step averages the members' next-token *probabilities* and returns the log of that mean,
log (1/M) sum_m p_m(y | ...). This is fairseq's choice (and Sockeye's default "linear"): the result
is again a normalised distribution, so hypothesis scores stay log-probabilities (comparable with a
single model's, and what `nmt score` reports), and one confident member cannot veto a token the
others like, as it can under a mean of log-probs (a product of experts). Members may be different
architectures; they must share the source and target vocabularies (checked when loading).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from nmt.models.base import EncoderOut, NMTModel, State


def mean_of_probs(log_probs: list[Tensor]) -> Tensor:
    """log of the mean of exp(log_probs) over members, computed stably."""
    return torch.logsumexp(torch.stack(log_probs), 0) - math.log(len(log_probs))


class Ensemble(NMTModel):
    """Members decode in lock step; the state holds one member state per member."""

    def __init__(self, members: list[NMTModel]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.members = nn.ModuleList(members)

    def set_attention_view(self, layer: int = -1, head: Optional[int] = None) -> None:
        for m in self.members:
            m.set_attention_view(layer, head)

    def attention_shape(self) -> tuple[int, int]:
        return self.members[0].attention_shape()

    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOut:
        encoded = [m.encode(src, src_mask) for m in self.members]
        return EncoderOut(encoded[0].memory, src_mask, encoded)

    def init_state(self, enc: EncoderOut) -> State:
        states = [m.init_state(e) for m, e in zip(self.members, enc.final)]
        return State({"members": [s.tensors for s in states]}, states[0].step)

    def decode_step(
        self, state: State, prev_tokens: Tensor
    ) -> tuple[Tensor, State, Optional[Tensor]]:
        log_probs, tensors, attns = [], [], []
        for m, t in zip(self.members, state["members"]):
            lp, new, attn = m.decode_step(State(t, state.step), prev_tokens)
            log_probs.append(lp.float())
            tensors.append(new.tensors)
            if attn is not None:
                attns.append(attn.float())
        # The alignment is the mean of the members that report one (seq2seq reports none).
        attn = torch.stack(attns).mean(0) if attns else None
        return mean_of_probs(log_probs), State({"members": tensors}, state.step + 1), attn

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: the log of the members' mean probabilities, [B, T, V]."""
        return mean_of_probs(
            [m(src, src_mask, tgt_in).float().log_softmax(-1) for m in self.members]
        )
