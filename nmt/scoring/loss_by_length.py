"""Loss by length: the reference's negative log-likelihood per target token, by source length.

BLEU needs a model that translates well before it shows where a long sentence loses information;
the loss on the reference shows it far earlier in training. Each reference is scored teacher-forced
as `nmt score` scores it (its EOS included), and a group of sentences (a source-length bucket, the
whole test set) gets its pooled loss: the sum of its tokens' NLL over the number of its tokens.
For the long sentences (from LONG_FROM source words) the loss is also pooled by relative position
in the reference, first tenth to last tenth: where in a long sentence a fixed vector runs out.

The 95% intervals resample sentences with the draws of `nmt.scoring.bootstrap` (those of BLEU's
intervals for the same bucket), so two models scored on the same sentences resample the same ones
and the gap between their losses gets a paired interval and p-value from the sentences' losses
alone (`sentence_nll.tsv` in each report).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from nmt.errors import NmtError
from nmt.scoring.bootstrap import (
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    interval,
    paired_p_value,
    resample_counts,
)
from nmt.scoring.metrics import bucket_bounds, bucket_members

TENTHS = 10  # relative positions in the reference: first tenth ... last tenth
LONG_FROM = 51  # source words: the long sentences, as the length verdicts of nmt.scoring.compare
SENTENCE_FILE = "sentence_nll.tsv"  # each reference's summed NLL and its tokens, one line each
UNIT = "nats per reference token, teacher-forced, EOS included"


def sentence_stats(token_log_probs: list[list[float]]) -> np.ndarray:
    """[n, 2]: each reference's summed NLL (nats) and its token count."""
    return np.array([[-sum(lps), len(lps)] for lps in token_log_probs], dtype=np.float64)


def tenth_stats(token_log_probs: list[list[float]]) -> np.ndarray:
    """[n, 2 * TENTHS]: each reference's summed NLL in each tenth of its tokens, then the number
    of its tokens there; token j of L falls in tenth floor(TENTHS * j / L)."""
    out = np.zeros((len(token_log_probs), 2 * TENTHS))
    for i, lps in enumerate(token_log_probs):
        nll = -np.asarray(lps, dtype=np.float64)
        tenth = (TENTHS * np.arange(len(nll))) // max(len(nll), 1)
        out[i, :TENTHS] = np.bincount(tenth, weights=nll, minlength=TENTHS)
        out[i, TENTHS:] = np.bincount(tenth, minlength=TENTHS)
    return out


def _pooled(sums: np.ndarray) -> np.ndarray:
    """Loss per token from summed stats [..., 2k] (k NLL sums, then k token counts)."""
    k = sums.shape[-1] // 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums[..., :k] / sums[..., k:]


def _group(stats: np.ndarray, idx: np.ndarray, n_samples: int, seed: int) -> list[dict]:
    """Pooled loss of the sentences `idx` for each of stats' k columns, with its interval."""
    sub = stats[idx]
    value = _pooled(sub.sum(axis=0))
    cis: list[Optional[list[float]]] = [None] * len(value)
    if n_samples and len(idx):
        resampled = _pooled(resample_counts(len(idx), n_samples, seed) @ sub)
        cis = [interval(col) if np.isfinite(col).all() else None for col in resampled.T]
    k = len(value)
    return [
        {
            "tokens": int(sub[:, k + j].sum()),
            "nll": None if not np.isfinite(value[j]) else float(value[j]),
            "nll_ci": cis[j],
        }
        for j in range(k)
    ]


def long_members(members: list[np.ndarray], ranges: list[tuple[int, Optional[int]]]) -> tuple:
    """The sentences of the buckets from LONG_FROM words pooled (else of the last bucket), and
    that range's (lo, hi)."""
    long = [k for k, (lo, _) in enumerate(ranges) if lo >= LONG_FROM] or [len(ranges) - 1]
    idx = np.sort(np.concatenate([members[k] for k in long]))
    return idx, (ranges[long[0]][0], ranges[long[-1]][1])


def loss_report(
    srcs: list[str],
    token_log_probs: list[list[float]],
    bounds: list[int],
    n_samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict:
    """scores.json's `loss_by_length`: the pooled loss of the whole set and of each source-length
    bucket (`bounds`, as BLEU's), with 95% intervals over sentences (`n_samples` resamples; 0:
    none), of the long sentences pooled (`long`), and theirs in each tenth of the reference
    (`positions`)."""
    if len(srcs) != len(token_log_probs):
        raise NmtError(f"cannot score: {len(srcs)} sources but {len(token_log_probs)} references")
    stats = sentence_stats(token_log_probs)
    ranges = bucket_bounds(bounds)
    members = bucket_members(srcs, ranges)
    out = {"unit": UNIT, "n": len(srcs), **_group(stats, np.arange(len(srcs)), n_samples, seed)[0]}
    out["buckets"] = [
        {"lo": lo, "hi": hi, "n": len(idx), **_group(stats, idx, n_samples, seed)[0]}
        for (lo, hi), idx in zip(ranges, members)
    ]
    idx, (lo, hi) = long_members(members, ranges)
    out["long"] = {"lo": lo, "hi": hi, "n": len(idx), **_group(stats, idx, n_samples, seed)[0]}
    tenths = tenth_stats([token_log_probs[i] for i in idx])
    out["positions"] = {
        "lo": lo,
        "hi": hi,
        "n": len(idx),
        "tenths": _group(tenths, np.arange(len(idx)), n_samples, seed),
    }
    if n_samples:
        out["bootstrap"] = {"samples": n_samples, "seed": seed, "confidence": 0.95}
    return out


def _gap(a: np.ndarray, b: np.ndarray, idx: np.ndarray, n_samples: int, seed: int) -> dict:
    """Loss of a minus loss of b on the sentences `idx`: the same resamples for both."""
    if not len(idx):
        return {"n": 0, "gap": None, "gap_ci": None, "p": None}
    la, lb = float(_pooled(a[idx].sum(0))[0]), float(_pooled(b[idx].sum(0))[0])
    if not n_samples:
        return {"n": len(idx), "gap": la - lb, "gap_ci": None, "p": None}
    counts = resample_counts(len(idx), n_samples, seed)
    ra, rb = _pooled(counts @ a[idx])[:, 0], _pooled(counts @ b[idx])[:, 0]
    return {
        "n": len(idx),
        "gap": la - lb,
        "gap_ci": interval(ra - rb),
        "p": paired_p_value(ra, rb, la, lb),
    }


def loss_gap(
    srcs: list[str],
    a: np.ndarray,
    b: np.ndarray,
    bounds: list[int],
    n_samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict:
    """The loss of model a minus model b (`sentence_stats` of each, on the same references) by
    source-length bucket, for the long sentences pooled (`long`) and overall (`all`), each with
    a paired 95% bootstrap interval and sacreBLEU's paired p-value."""
    if not (len(a) == len(b) == len(srcs)):
        raise NmtError(
            f"cannot compare losses: {len(a)} and {len(b)} sentences for {len(srcs)} sources"
        )
    ranges = bucket_bounds(bounds)
    members = bucket_members(srcs, ranges)
    idx, (lo, hi) = long_members(members, ranges)
    return {
        "buckets": [
            {"lo": lo_, "hi": hi_, **_gap(a, b, m, n_samples, seed)}
            for (lo_, hi_), m in zip(ranges, members)
        ],
        "long": {"lo": lo, "hi": hi, **_gap(a, b, idx, n_samples, seed)},
        "all": {"lo": 1, "hi": None, **_gap(a, b, np.arange(len(srcs)), n_samples, seed)},
        "samples": n_samples,
        "seed": seed,
    }


def write_sentence_losses(report_dir: str | Path, stats: np.ndarray) -> None:
    """`sentence_nll.tsv`: each reference's summed NLL and token count, which a later paired
    comparison of two models reads."""
    from nmt.files import atomic_write

    lines = "".join(f"{nll:.6f}\t{int(t)}\n" for nll, t in stats)
    atomic_write(Path(report_dir) / SENTENCE_FILE, "nll\ttokens\n" + lines)


def read_sentence_losses(report_dir: str | Path) -> Optional[np.ndarray]:
    """[n, 2] from a report's `sentence_nll.tsv`, or None when it has none."""
    path = Path(report_dir) / SENTENCE_FILE
    if not path.is_file():
        return None
    try:
        return np.loadtxt(path, delimiter="\t", skiprows=1, ndmin=2, dtype=np.float64)
    except ValueError as e:
        raise NmtError(f"cannot read {path}: {e}") from None
