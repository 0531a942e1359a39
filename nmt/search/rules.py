"""Per-step constraints every search applies the same way: no PAD or BOS, EOS at the length
limit, a forced target prefix per sentence (the limit grows to fit it), a mask of repeated
n-grams and a masked part of the vocabulary (`decode.language_vocab`); and the time limit a
caller set (`nmt.search.deadline`), checked before every step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import torch
from torch import Tensor

from nmt.data.batching import pad_batch
from nmt.search import deadline
from nmt.search.hypotheses import NEG_INF

if TYPE_CHECKING:
    from nmt.models.base import NMTModel


def _restrict(log_probs: Tensor, at_limit: Optional[Tensor], model: "NMTModel") -> Tensor:
    """Ban PAD and BOS everywhere; rows at their length limit (at_limit, None when no row can
    be) may only emit EOS. In place: decode_step's log-probs are the search's to overwrite (a
    copy of [rows, vocab] per step was a tenth of beam search's time)."""
    never = torch.tensor([model.pad_id, model.bos_id], device=log_probs.device)
    out = log_probs.index_fill_(1, never, NEG_INF)
    if at_limit is not None:
        not_eos = torch.arange(log_probs.size(-1), device=log_probs.device) != model.eos_id
        out.masked_fill_(at_limit.unsqueeze(-1) & not_eos, NEG_INF)
    return out


@dataclass
class Rules:
    """Per-step constraints shared by greedy, beam and sampling, for a batch of B sentences."""

    prefix: Optional[Tensor] = None  # [B, P] forced first target ids (PAD after the end)
    prefix_len: Optional[Tensor] = None  # [B]
    no_repeat_ngram: int = 0
    masked: Optional[Tensor] = None  # [V] or per sentence [B, V] bool: ids no row may choose

    @classmethod
    def build(
        cls,
        prefixes: Optional[list[list[int]]],
        no_repeat_ngram: int = 0,
        device: str | torch.device = "cpu",
        masked: Optional[Tensor] = None,
    ) -> "Rules":
        if not prefixes:
            return cls(no_repeat_ngram=no_repeat_ngram, masked=masked)
        prefix, mask = pad_batch(prefixes)
        return cls(prefix.to(device), mask.sum(1).to(device), no_repeat_ngram, masked)

    def repeat(self, n: int) -> "Rules":
        """The rules of every sentence repeated n times in a row (samples of one sentence)."""
        masked = self.masked
        if masked is not None and masked.dim() == 2:
            masked = masked.repeat_interleave(n, 0)
        if self.prefix is None:
            return Rules(no_repeat_ngram=self.no_repeat_ngram, masked=masked)
        return Rules(
            self.prefix.repeat_interleave(n, 0),
            self.prefix_len.repeat_interleave(n),
            self.no_repeat_ngram,
            masked,
        )

    def limit(self, limit: Tensor) -> Tensor:
        """Length limits grown so that every prefix fits before its EOS."""
        return limit if self.prefix_len is None else torch.maximum(limit, self.prefix_len)

    def apply(self, log_probs: Tensor, t: int, hist: Tensor, sent: Tensor) -> Tensor:
        """log_probs [R, V] of rows whose sentences are `sent` [R], history hist [R, t]."""
        forcing = self.prefix is not None and t < self.prefix.size(1)
        if forcing:
            # Inside its prefix a row may emit only the forced token, at its model log-prob
            # (even if it repeats an n-gram or is masked: the user asked for it).
            forced = self.prefix[sent, t].unsqueeze(1)
            only = torch.full_like(log_probs, NEG_INF).scatter(
                1, forced, log_probs.gather(1, forced)
            )
        out = (
            _mask_repeats(log_probs, hist, self.no_repeat_ngram)
            if self.no_repeat_ngram
            else log_probs
        )
        if self.masked is not None:
            mask = self.masked if self.masked.dim() == 1 else self.masked[sent]
            out = out.masked_fill_(mask, NEG_INF)  # log_probs are the search's to change
        if forcing:
            out = torch.where((t < self.prefix_len[sent]).unsqueeze(1), only, out)
        return out


def _mask_repeats(log_probs: Tensor, hist: Tensor, n: int) -> Tensor:
    """Mask every token that would complete an n-gram already in the row's history."""
    if n == 1:
        repeats = hist
    else:
        if hist.size(1) < n:
            return log_probs
        grams = hist.unfold(1, n, 1)  # [R, W, n]
        match = (grams[:, :, :-1] == hist[:, -(n - 1) :].unsqueeze(1)).all(-1)
        repeats = grams[:, :, -1].masked_fill(~match, -1)
    if repeats.numel() == 0:
        return log_probs
    hit = torch.zeros(
        log_probs.shape[0], log_probs.shape[1] + 1, dtype=torch.bool, device=log_probs.device
    )
    hit.scatter_(1, repeats.masked_fill(repeats < 0, log_probs.size(1)), True)
    return log_probs.masked_fill(hit[:, :-1], NEG_INF)


def allowed(
    model: "NMTModel",
    log_probs: Tensor,
    t: int,
    limit: Tensor,
    shortest: int,
    rules: "Rules",
    hist: Tensor,
    sent: Tensor,
) -> Tensor:
    """Step t's fp32 log-probs [R, V] with everything the limits and rules forbid at -inf (in
    place when they are fp32 already; the caller may change them further). `shortest` is the
    smallest limit of the batch, so that steps before it skip the at-limit mask. Past the
    caller's deadline (`nmt.search.deadline`) it raises DeadlinePassed instead."""
    deadline.check()
    at_limit = limit <= t if t >= shortest else None
    return rules.apply(_restrict(log_probs.float(), at_limit, model), t, hist, sent)
