"""How long the output is against its reference, per group of sentences: the length ratio
(hypothesis tokens over reference tokens, BLEU's own counts), BLEU's brevity penalty from that
ratio, and the share of hypotheses shorter than half their reference, each with a bootstrap
interval over the group's sentences.

A BLEU that falls with length is either short output (the ratio and brevity penalty fall, many
halves) or wrong words at the right length (ratio near 1, the n-gram precisions fall): these
three numbers tell the two apart. compare-mt (Neubig et al. 2019) reports the ratio by bucket;
here it gets the same intervals as the scores. Counts are sacreBLEU BLEU's sentence statistics
(13a tokens), so the ratio and the penalty are exactly the ones in BLEU's signature line.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from nmt.scoring.bootstrap import interval

SHORT_SHARE = 0.5  # a hypothesis under this fraction of its reference's tokens counts as short


def length_stats(bleu_stats: np.ndarray) -> np.ndarray:
    """[n, 3] per sentence from sacreBLEU BLEU's sentence statistics (hypothesis length,
    reference length first): hypothesis tokens, reference tokens, 1 if the hypothesis is short."""
    hyp, ref = bleu_stats[:, 0], bleu_stats[:, 1]
    return np.stack([hyp, ref, (hyp < SHORT_SHARE * ref).astype(np.float64)], axis=1)


def brevity_penalty(hyp_tokens: float, ref_tokens: float) -> float:
    """BLEU's brevity penalty (Papineni et al. 2002), as sacreBLEU computes it."""
    if hyp_tokens >= ref_tokens:
        return 1.0
    return math.exp(1 - ref_tokens / hyp_tokens) if hyp_tokens > 0 else 0.0


def _values(sums: np.ndarray, n: float) -> tuple[float, float, float]:
    hyp, ref, short = sums
    return (hyp / ref if ref else 0.0), brevity_penalty(hyp, ref), (short / n if n else 0.0)


def length_record(stats: np.ndarray, counts: Optional[np.ndarray] = None) -> dict:
    """The group's `ratio`, `bp` and `short` (a share), each with `_ci` from `counts` ([S, n]
    resample counts, the draws the group's scores use) when given."""
    ratio, bp, short = _values(stats.sum(axis=0), len(stats))
    out = {"ratio": ratio, "bp": bp, "short": short}
    if counts is not None:
        sums = counts @ stats
        samples = np.array([_values(row, len(stats)) for row in sums])
        for k, key in enumerate(("ratio", "bp", "short")):
            out[f"{key}_ci"] = interval(samples[:, k])
    return out
