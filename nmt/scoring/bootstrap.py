"""Bootstrap resampling over sentence-level sufficient statistics: 95% confidence intervals of a
corpus score and sacreBLEU's paired bootstrap test between two systems.

sacreBLEU (`sacrebleu.significance`) resamples by materialising every resample's rows, an
[S, n, d] array, and summing it. Here a resample is a vector of counts (how often each sentence
was drawn), so all S resampled corpus statistics are one matrix product [S, n] @ [n, d] and the
scores come from sacreBLEU's own `_compute_score_from_stats`. The draws are sacreBLEU's draws
(`default_rng(seed).choice(n, size=(S, n))`), so a p-value equals sacreBLEU's `PairedTest` with
the same seed, and two reports on the same test set resample the same sentences: a paired test
can be run later from the two reports alone.
"""

from __future__ import annotations

import numpy as np

DEFAULT_SAMPLES = 1000
DEFAULT_SEED = 12345  # sacreBLEU's default SACREBLEU_SEED
SIGNIFICANCE = 0.05


def resample_counts(
    n: int, n_samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """[n_samples, n]: how often each of n sentences is drawn in each resample (rows sum to n)."""
    idx = np.random.default_rng(seed).choice(n, size=(n_samples, n), replace=True)
    flat = (idx + n * np.arange(n_samples)[:, None]).ravel()
    return np.bincount(flat, minlength=n_samples * n).reshape(n_samples, n).astype(np.float64)


def resampled_scores(metric, stats: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The corpus score of each resample: `metric` is a sacreBLEU metric, `stats` [n, d] its
    sentence statistics, `counts` [S, n] from `resample_counts`."""
    sums = counts @ np.asarray(stats, dtype=np.float64)
    return np.array([metric._compute_score_from_stats(row).score for row in sums])


def interval(samples: np.ndarray) -> list[float]:
    """The 95% percentile interval [low, high] of bootstrap scores (sacreBLEU's estimate_ci
    takes the same order statistics, 1/40 in from each end, but reports mean +- half-width)."""
    s = np.sort(np.asarray(samples, dtype=np.float64))
    cut = len(s) // 40
    return [float(s[cut]), float(s[len(s) - cut - 1])]


def paired_p_value(
    samples_a: np.ndarray, samples_b: np.ndarray, score_a: float, score_b: float
) -> float:
    """sacreBLEU's paired bootstrap p-value (Koehn 2004, as Moses'
    bootstrap-hypothesis-difference-significance.pl): how often the resampled difference,
    centred on its mean, exceeds the observed difference; `samples_*` come from the same counts.
    One change: no observed difference gives p = 1, where sacreBLEU's strict `>` would give its
    smallest p-value, 1 / (S + 1), and call two identical systems significantly different."""
    if score_a == score_b:
        return 1.0
    diffs = np.abs(np.asarray(samples_b) - np.asarray(samples_a))
    centred = diffs - diffs.mean()
    return float((np.sum(centred > abs(score_b - score_a)) + 1) / (len(diffs) + 1))
