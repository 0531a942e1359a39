"""What a search returns, how it ranks it, and how long it may grow.

Scores are sums of model log-probs including the EOS. Finished hypotheses rank by
score / lp(len) with the GNMT length penalty lp = ((5 + len) / 6) ** alpha, len counting the EOS
(Wu et al. 2016). A sentence's output limit is max_len = a * src_len + b (src_len counts the real
source tokens, EOS included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from torch import Tensor

from nmt.errors import NmtError

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    tokens: list[int]  # output ids, without BOS and without the final EOS
    score: float  # sum of token log-probs including the EOS (no length penalty)
    norm_score: float  # ranking score: score / lp(len(tokens) + 1)
    attn: Optional[Tensor]  # [len(tokens) + 1, S_real] alignment over the real source, or None
    # Positive constraint phrases the output misses (> 0 only for one that ran into its length
    # limit first); None when decoded without constraints.
    unmet: Optional[int] = None


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT length penalty ((5 + len) / 6) ** alpha; 1 when alpha is 0."""
    return ((5.0 + length) / 6.0) ** alpha


def max_lengths(src_mask: Tensor, a: float, b: int) -> Tensor:
    """Per-sentence output limit floor(a * src_len + b), src_len = real source tokens."""
    return (a * src_mask.sum(1).double() + b).long()


def check_nbest(beam: int, nbest: int, sample: bool = False, name: str = "nbest") -> None:
    """The one n-best rule of every front end and search: 1 <= nbest <= beam (sampling draws
    nbest samples and has no beam). `name` is the option as the caller's user spells it."""
    if beam < 1:
        raise NmtError(f"beam: expected at least 1, got {beam}")
    if nbest < 1:
        raise NmtError(f"{name}: expected at least 1, got {nbest}")
    if nbest > beam and not sample:
        raise NmtError(f"{name} {nbest} needs a beam of at least {nbest} (beam is {beam})")


def collect(
    tokens: Tensor,
    score: Tensor,
    norm: Tensor,
    length: Tensor,
    attn: Optional[Tensor],
    src_mask: Tensor,
    nbest: int,
    unmet: Optional[Tensor] = None,
) -> list[list[Hypothesis]]:
    """Device buffers [B, N, ...] (best first, -inf norm = empty slot) -> Python hypotheses.

    One transfer per buffer; attention keeps the steps incl. EOS and the real source columns."""
    tokens, score, norm, length = (x.cpu().tolist() for x in (tokens, score, norm, length))
    missed = None if unmet is None else unmet.cpu().tolist()
    attn, mask = (None if attn is None else attn.cpu()), src_mask.cpu()
    out = []
    for i in range(len(tokens)):
        out.append(
            [
                Hypothesis(
                    tokens[i][k][: length[i][k] - 1],
                    score[i][k],
                    norm[i][k],
                    None if attn is None else attn[i, k, : length[i][k], mask[i]],
                    None if missed is None else missed[i][k],
                )
                for k in range(nbest)
                if norm[i][k] != NEG_INF
            ]
        )
    return out
