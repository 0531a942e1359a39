"""Temperature sampling over translation directions (Arivazhagan et al. 2019, "Massively
Multilingual Neural Machine Translation in the Wild"): an epoch draws direction d's training pairs
with probability p_d proportional to n_d ** (1 / T), n_d its kept pairs. T = 1 is proportional
(every pair once, the plain epoch); a larger T flattens the shares towards equal, so a small
direction is upsampled and a large one seen in part, which helps the small ones at little cost.

An epoch keeps its size (the sum of n_d): direction d contributes round(N * p_d) pairs, all of
its pairs as many whole times as fit and a seeded random subset for the rest.
"""

from __future__ import annotations

import logging
from typing import Optional

import numpy as np

log = logging.getLogger("nmt")


def direction_shares(sizes: np.ndarray, temperature: float) -> np.ndarray:
    """p_d = n_d^(1/T) / sum_k n_k^(1/T); a direction with no pairs gets none. Computed in log
    space (a softmax of log(n_d) / T), so a small T cannot overflow n_d^(1/T) into inf/nan."""
    n = np.asarray(sizes, dtype=np.float64)
    if not np.any(n > 0):
        return np.zeros_like(n)
    with np.errstate(divide="ignore"):
        logits = np.log(n) / temperature  # -inf for an empty direction: a share of exactly 0
    w = np.exp(logits - logits.max())
    return w / w.sum()


def epoch_counts(sizes: np.ndarray, temperature: float) -> np.ndarray:
    """Pairs each direction contributes to an epoch of sum(sizes) pairs: N * p_d, rounded by
    largest remainders so the counts add up to N exactly."""
    total = int(np.sum(sizes))
    exact = direction_shares(sizes, temperature) * total
    counts = np.floor(exact).astype(np.int64)
    short = total - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
    return counts


def unsampled_directions(sizes: dict[str, int], temperature: float) -> list[str]:
    """The directions an epoch draws no pair of (a small T gives a small direction a share that
    rounds to nothing), in the order given."""
    counts = epoch_counts(np.array(list(sizes.values()), dtype=np.int64), temperature)
    return [name for name, count in zip(sizes, counts) if count == 0]


def warn_unsampled(sizes: dict[str, int], temperature: float) -> None:
    """One warning line per direction that an epoch leaves out, naming it and why."""
    if len(sizes) < 2 or not any(sizes.values()):
        return
    for name in unsampled_directions(sizes, temperature):
        why = (
            "the corpus filter kept none of its pairs"
            if not sizes[name]
            else f"data.temperature {temperature:g} gives its {sizes[name]:,} kept pairs a share "
            f"that rounds to 0 of an epoch of {sum(sizes.values()):,}; raise data.temperature "
            f"(1 = every pair once)"
        )
        log.warning(f"direction {name} gets no training pair: {why}")


def sampled_examples(
    groups: np.ndarray, temperature: float, rng: np.random.Generator
) -> Optional[np.ndarray]:
    """One epoch's example indices (with repeats where a direction is upsampled), given each
    example's direction index; None when the epoch is every example once (T = 1 or one
    direction), so the plain plan stays exactly as it was."""
    groups = np.asarray(groups)
    sizes = np.bincount(groups) if groups.size else np.zeros(0, dtype=np.int64)
    if temperature == 1.0 or np.count_nonzero(sizes) < 2:
        return None
    index = np.int32 if groups.size < 2**31 else np.int64
    parts = []
    for d, count in enumerate(epoch_counts(sizes, temperature)):
        members = np.flatnonzero(groups == d).astype(index)
        if not members.size:
            continue
        whole, rest = divmod(int(count), members.size)
        parts += [members] * whole
        parts.append(np.sort(rng.choice(members, rest, replace=False)))
    return np.concatenate(parts)
