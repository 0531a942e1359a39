"""Greedy search (and sampling, which draws where greedy picks), a whole batch in lock-step:
one `encode`, then one `decode_step` per output position for every sentence still running."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch
from torch import Tensor

from nmt.search.hypotheses import Hypothesis, collect, length_penalty, max_lengths
from nmt.search.rows import should_compact
from nmt.search.rules import Rules, allowed
from nmt.search.sampling import Sampler
from nmt.search.top_k import row_max

if TYPE_CHECKING:
    from nmt.models.base import NMTModel


@torch.inference_mode()
def greedy_search(
    model: "NMTModel",
    src: Tensor,
    src_mask: Tensor,
    *,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    alpha: float = 0.0,
    return_attn: bool = False,
    rules: Optional[Rules] = None,
    sampler: Optional[Sampler] = None,
) -> list[list[Hypothesis]]:
    """Pick the most probable token at every step (or draw it with `sampler`).

    `alpha` only sets the reported norm_score."""
    B, S = src.shape
    dev = src.device
    rules = rules or Rules()
    limit = rules.limit(max_lengths(src_mask, max_len_a, max_len_b))
    steps, shortest = int(limit.max()) + 1, int(limit.min())  # + 1 for the EOS
    out_tok = torch.full((B, steps), model.pad_id, dtype=torch.long, device=dev)
    out_score = torch.zeros(B, device=dev)
    out_len = torch.zeros(B, dtype=torch.long, device=dev)
    out_attn: Optional[Tensor] = torch.zeros(B, steps, S, device=dev) if return_attn else None

    state = model.init_state(model.encode(src, src_mask))
    ids = torch.arange(B, device=dev)  # active row -> sentence
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    prev = torch.full((B,), model.bos_id, dtype=torch.long, device=dev)
    for t in range(steps):
        log_probs, state, attn = model.decode_step(state, prev)
        hist = out_tok[ids, :t] if rules.no_repeat_ngram else out_tok[:0, :t]  # only n-grams
        log_probs = allowed(model, log_probs, t, limit[ids], shortest, rules, hist, ids)
        if sampler is None:
            tok_lp, tok = row_max(log_probs)
        else:
            tok = sampler.pick(log_probs)
            tok_lp = log_probs.gather(1, tok.unsqueeze(1)).squeeze(1)
        tok = tok.masked_fill(done, model.pad_id)
        out_tok[ids, t] = tok
        out_score.index_add_(0, ids, tok_lp.masked_fill(done, 0.0))
        out_len.index_add_(0, ids, (~done).long())
        if out_attn is not None and attn is not None:
            out_attn[ids, t] = attn.float()
        done = done | (tok == model.eos_id)
        prev = tok
        all_done, compact = should_compact(done)
        if all_done:
            break
        if compact:
            keep = (~done).nonzero().squeeze(1)
            ids, done, prev, state = ids[keep], done[keep], prev[keep], state.select(keep)

    if attn is None:  # a model without attention
        out_attn = None
    norm = out_score / length_penalty(out_len, alpha)
    one = (x.unsqueeze(1) for x in (out_tok, out_score, norm, out_len))
    return collect(*one, None if out_attn is None else out_attn.unsqueeze(1), src_mask, 1)
