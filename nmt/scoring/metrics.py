"""Scoring: the metric table's scores (sacreBLEU BLEU, chrF, TER, ... and COMET from sentence
scores), each by source length with bootstrap intervals; paired significance tests between two
systems; training's validation scores; reading scores.json back.

Works on plain strings only (detokenised hypotheses and references), so it never depends on
models or data code. What a metric is (its sacreBLEU class and options, its direction) is its row
in `nmt.config.metrics`; sacreBLEU's defaults (13a tokenisation, exp smoothing) apply otherwise and
every score is stored with its signature, so numbers are comparable across papers and runs. Every
score comes from sentence-level sufficient statistics summed over the sentences it covers, the way
sacreBLEU computes a corpus score, so buckets and bootstrap resamples cost one extraction.

Bucketing follows Bahdanau et al. (2014), Fig. 2: sentences are grouped by source length in
words and each group is scored as its own corpus (BLEU is not an average of sentence BLEUs).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import sacrebleu.metrics
from sacrebleu.metrics.base import Metric

from nmt.config.fields import did_you_mean
from nmt.config.metrics import (
    METRICS,
    SACREBLEU,
    SENTENCES,
    report_metrics,
    text_metrics,
    validation_metrics,
)
from nmt.errors import NmtError
from nmt.scoring.bootstrap import (
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    interval,
    paired_p_value,
    resample_counts,
    resampled_scores,
)
from nmt.scoring.output_length import length_record, length_stats

DEFAULT_BUCKETS = [10, 20, 30, 40, 50]  # inclusive upper bounds in source words; "51+" follows

SCORES_FILE = "scores.json"
# and a score of at least one metric of the table: a report of --metrics ter holds no BLEU
REQUIRED_KEYS = ("n", "buckets")


def _check_parallel(hyps: list[str], refs: list[str], srcs: list[str] | None = None) -> None:
    if len(hyps) != len(refs):
        raise NmtError(f"cannot score: {len(hyps)} hypotheses but {len(refs)} references")
    if srcs is not None and len(srcs) != len(hyps):
        raise NmtError(f"cannot score: {len(srcs)} sources but {len(hyps)} hypotheses")


DEFAULT_METRICS = ("bleu", "chrf")


def make_metric(name: str) -> Metric:
    """The sacreBLEU metric of a row of the metric table, built with the row's options (the
    settings its signature records)."""
    row = METRICS.get(name)
    if row is None:
        known = text_metrics()
        raise NmtError(
            f"unknown metric '{name}'; expected one of {', '.join(known)}"
            + did_you_mean(name, known)
        )
    if not row.from_text:
        raise NmtError(
            f"metric '{name}' is not computed from hypotheses and references alone"
            + (
                " (a model gives its sentence scores: --comet-model)"
                if row.scorer == SENTENCES
                else ""
            )
        )
    return getattr(sacrebleu.metrics, row.scorer.removeprefix(SACREBLEU))(**row.options)


def sentence_stats(metric: Metric, hyps: list[str], refs: list[str]) -> np.ndarray:
    """[n, d] sentence-level sufficient statistics; a corpus score is a function of their sum."""
    return np.asarray(metric._extract_corpus_statistics(hyps, [refs]), dtype=np.float64)


def _score(metric: Metric, stats: np.ndarray) -> float:
    return float(metric._compute_score_from_stats(stats.sum(axis=0)).score)


class MeanScore:
    """A metric whose corpus score is the mean of given sentence scores (COMET): its sentence
    statistics are (score, 1), so it resamples like the sacreBLEU metrics."""

    def __init__(self, signature: str) -> None:
        self.signature = signature

    def get_signature(self) -> str:
        return self.signature

    def _compute_score_from_stats(self, stats):
        class Score:
            score = float(stats[0] / stats[1]) if stats[1] else 0.0

        return Score

    @staticmethod
    def stats(scores: list[float]) -> np.ndarray:
        return np.stack([np.asarray(scores, dtype=np.float64), np.ones(len(scores))], axis=1)


def _all_stats(
    hyps: list[str],
    refs: list[str],
    metrics: tuple[str, ...],
    extra: dict[str, tuple[MeanScore, list[float]]] | None = None,
) -> dict[str, tuple[Metric, np.ndarray]]:
    _check_parallel(hyps, refs)
    if not hyps:
        raise NmtError("cannot score: no hypotheses")
    out = {
        name: (m, sentence_stats(m, hyps, refs)) for name in metrics for m in [make_metric(name)]
    }
    for name, (metric, scores) in (extra or {}).items():
        if name not in METRICS or METRICS[name].scorer != SENTENCES:
            raise NmtError(f"'{name}' has no row of sentence scores in the metric table")
        if len(scores) != len(hyps):
            raise NmtError(f"cannot score: {len(scores)} {name} scores for {len(hyps)} hypotheses")
        out[name] = (metric, MeanScore.stats(scores))
    return out


def _corpus(stats: dict[str, tuple[Metric, np.ndarray]]) -> dict:
    out: dict = {}
    for name, (metric, st) in stats.items():
        out[name] = _score(metric, st)
        out["signature" if name == "bleu" else f"{name}_signature"] = str(metric.get_signature())
    return {**out, "n": len(next(iter(stats.values()))[1])}


def corpus_scores(
    hyps: list[str], refs: list[str], metrics: tuple[str, ...] = DEFAULT_METRICS
) -> dict:
    """Corpus BLEU and chrF (and TER if asked) of `hyps` against one reference each, with
    sacreBLEU signatures."""
    return _corpus(_all_stats(hyps, refs, metrics))


def validation_row(
    outputs: dict[str, tuple[list[str], list[str]]], per_direction: bool = False
) -> dict:
    """Training's validation scores from each direction's (hypotheses, references): every
    validation metric of the table, its mean over the directions under its own name (what best.pt,
    early stopping and the plateau schedule follow) and with `per_direction` METRIC_DIRECTION."""
    names = validation_metrics()
    scores = {d: corpus_scores(hyps, refs, names) for d, (hyps, refs) in outputs.items()}
    row = {m: float(np.mean([s[m] for s in scores.values()])) for m in names}
    if per_direction:
        for d, s in scores.items():
            row.update({f"{m}_{d}": s[m] for m in names})
    return row


def bucket_bounds(bounds: list[int]) -> list[tuple[int, int | None]]:
    """Inclusive (lo, hi) word ranges from upper bounds: [10, 20] -> [(1, 10), (11, 20), (21, None)]."""
    if any(not isinstance(b, int) or b < 1 for b in bounds):
        raise NmtError(f"length buckets must be positive integers, got {list(bounds)}")
    if any(a >= b for a, b in zip(bounds, bounds[1:])):
        raise NmtError(f"length buckets must be strictly increasing, got {list(bounds)}")
    los = [1] + [b + 1 for b in bounds]
    his: list[int | None] = [*bounds, None]
    return list(zip(los, his))


def bucket_label(lo: int, hi: int | None) -> str:
    """Label of a bucket: "1-10" when closed, "51+" for the open last one."""
    return f"{lo}+" if hi is None else f"{lo}-{hi}"


def bucket_members(srcs: list[str], ranges: list[tuple[int, int | None]]) -> list[np.ndarray]:
    """Sentence indices of each bucket. A sentence goes to the first bucket whose upper bound
    covers its word count, so the rare empty source (0 words) is counted in the first bucket and
    the counts always add up to n."""
    members: list[list[int]] = [[] for _ in ranges]
    for i, src in enumerate(srcs):
        words = len(src.split())
        members[next(k for k, (_, hi) in enumerate(ranges) if hi is None or words <= hi)].append(i)
    return [np.asarray(m, dtype=np.int64) for m in members]


def merge_small_buckets(srcs: list[str], bounds: list[int], min_n: int) -> list[int]:
    """Upper bounds with adjacent buckets merged until each holds at least `min_n` sentences (or
    one bucket is left): the smallest bucket joins its smaller neighbour, so a thin tail of long
    sentences becomes one wider bucket instead of a noisy point."""
    bounds = list(bounds)
    while bounds:
        counts = [len(m) for m in bucket_members(srcs, bucket_bounds(bounds))]
        k = min(range(len(counts)), key=lambda i: (counts[i], -i))  # ties: the longer bucket
        if counts[k] >= min_n:
            break
        left = counts[k - 1] if k > 0 else None
        right = counts[k + 1] if k + 1 < len(counts) else None
        join_left = right is None or (left is not None and left <= right)
        del bounds[k - 1 if join_left else k]  # the bound between bucket k and that neighbour
    return bounds


def score_report(
    srcs: list[str],
    hyps: list[str],
    refs: list[str],
    bounds: list[int] = DEFAULT_BUCKETS,
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    n_samples: int = 0,
    seed: int = DEFAULT_SEED,
    extra: dict[str, tuple[MeanScore, list[float]]] | None = None,
) -> dict:
    """Everything scores.json holds: corpus scores plus each metric per source-length bucket,
    each bucket scored as its own corpus (None when empty). With `n_samples` > 0 every score
    gets a 95% bootstrap interval `METRIC_ci` = [low, high] from that many resamples. `extra`
    adds metrics given as sentence scores (name -> (MeanScore, scores)), averaged per group.
    With BLEU, each group also gets `length`: its output length against the reference
    (`nmt.scoring.output_length`), on the same draws."""
    _check_parallel(hyps, refs, srcs)
    stats = _all_stats(hyps, refs, metrics, extra)
    lengths = length_stats(stats["bleu"][1]) if "bleu" in stats else None
    scores = _corpus(stats)
    ranges = bucket_bounds(bounds)
    members = bucket_members(srcs, ranges)
    buckets = [{"lo": lo, "hi": hi, "n": len(idx)} for (lo, hi), idx in zip(ranges, members)]
    for out, idx in [*zip(buckets, members), (scores, np.arange(len(hyps)))]:
        # one set of draws per group, shared by the metrics
        counts = resample_counts(len(idx), n_samples, seed) if n_samples and len(idx) else None
        for name, (metric, st) in stats.items():
            out[name] = _score(metric, st[idx]) if len(idx) else None
            if n_samples:
                out[f"{name}_ci"] = (
                    None if counts is None else interval(resampled_scores(metric, st[idx], counts))
                )
        if lengths is not None:
            out["length"] = length_record(lengths[idx], counts) if len(idx) else None
    scores["buckets"] = buckets
    if n_samples:
        scores["bootstrap"] = {"samples": n_samples, "seed": seed, "confidence": 0.95}
    return scores


def bleu_by_length(
    srcs: list[str], hyps: list[str], refs: list[str], bounds: list[int] = DEFAULT_BUCKETS
) -> list[dict]:
    """Corpus BLEU of each source-length bucket (None for an empty bucket)."""
    return score_report(srcs, hyps, refs, bounds, metrics=("bleu",))["buckets"]


def paired_tests(
    srcs: list[str],
    refs: list[str],
    hyps_a: list[str],
    hyps_b: list[str],
    bounds: list[int],
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    n_samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict:
    """sacreBLEU's paired bootstrap test of system b against baseline a, on the whole test set
    and in each source-length bucket: {"p": {metric: p}, "buckets": [{metric: p or None}]}."""
    _check_parallel(hyps_b, refs, srcs)
    sa, sb = _all_stats(hyps_a, refs, metrics), _all_stats(hyps_b, refs, metrics)
    members = bucket_members(srcs, bucket_bounds(bounds))
    out: dict = {"p": {}, "buckets": [{} for _ in members]}
    for p, idx in [*zip(out["buckets"], members), (out["p"], np.arange(len(refs)))]:
        counts = resample_counts(len(idx), n_samples, seed) if len(idx) else None  # both systems
        for name, (metric, a) in sa.items():
            b = sb[name][1]
            p[name] = (
                None
                if counts is None
                else paired_p_value(
                    resampled_scores(metric, a[idx], counts),
                    resampled_scores(metric, b[idx], counts),
                    _score(metric, a[idx]),
                    _score(metric, b[idx]),
                )
            )
    return out


def data_fingerprint(srcs: list[str], refs: list[str]) -> str:
    """sha256 of the source and reference lines: two reports with the same one were scored on
    the same test set, in the same order."""
    h = hashlib.sha256()
    for src, ref in zip(srcs, refs):
        h.update(src.encode("utf-8") + b"\t" + ref.encode("utf-8") + b"\n")
    return h.hexdigest()


def load_scores(report_dir: str | os.PathLike) -> dict:
    """Read `report_dir`/scores.json; NmtError naming the path if it is missing or malformed."""
    path = Path(report_dir) / SCORES_FILE
    try:
        scores = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NmtError(f"no scores file at {path} (run evaluation first)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NmtError(f"cannot read scores file {path}: {e}") from None
    if (
        not isinstance(scores, dict)
        or any(k not in scores for k in REQUIRED_KEYS)
        or not any(m in scores for m in report_metrics())
    ):
        raise NmtError(
            f"scores file {path} is not a scores report (needs keys {', '.join(REQUIRED_KEYS)} "
            f"and a score: {', '.join(report_metrics())})"
        )
    return scores
