"""Scoring: sacreBLEU corpus BLEU and chrF, BLEU by source length; reading scores.json back.

Works on plain strings only (detokenised hypotheses and references), so it never depends on
models or data code. BLEU uses sacreBLEU's defaults (13a tokenisation, exp smoothing) and every
score is stored with its signature, so numbers are comparable across papers and runs.

Bucketing follows Bahdanau et al. (2014), Fig. 2: sentences are grouped by source length in
words and each group is scored as its own corpus (BLEU is not an average of sentence BLEUs).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF

from nmt.errors import NmtError

DEFAULT_BUCKETS = [10, 20, 30, 40, 50]  # inclusive upper bounds in source words; "51+" follows

SCORES_FILE = "scores.json"
REQUIRED_KEYS = ("bleu", "chrf", "signature", "n", "buckets")


def _check_parallel(hyps: list[str], refs: list[str], srcs: list[str] | None = None) -> None:
    if len(hyps) != len(refs):
        raise NmtError(f"cannot score: {len(hyps)} hypotheses but {len(refs)} references")
    if srcs is not None and len(srcs) != len(hyps):
        raise NmtError(f"cannot score: {len(srcs)} sources but {len(hyps)} hypotheses")


def corpus_scores(hyps: list[str], refs: list[str]) -> dict:
    """Corpus BLEU and chrF of `hyps` against one reference each, with sacreBLEU signatures."""
    _check_parallel(hyps, refs)
    if not hyps:
        raise NmtError("cannot score: no hypotheses")
    bleu, chrf = BLEU(), CHRF()
    return {
        "bleu": bleu.corpus_score(hyps, [refs]).score,
        "chrf": chrf.corpus_score(hyps, [refs]).score,
        "signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "n": len(hyps),
    }


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


def bleu_by_length(srcs: list[str], hyps: list[str], refs: list[str],
                   bounds: list[int] = DEFAULT_BUCKETS) -> list[dict]:
    """Corpus BLEU of each source-length bucket (None for an empty bucket).

    A sentence goes to the first bucket whose upper bound covers its word count, so the rare
    empty source (0 words) is counted in the first bucket and the counts always add up to n.
    """
    _check_parallel(hyps, refs, srcs)
    ranges = bucket_bounds(bounds)
    members: list[list[int]] = [[] for _ in ranges]
    for i, src in enumerate(srcs):
        words = len(src.split())
        k = next(k for k, (_, hi) in enumerate(ranges) if hi is None or words <= hi)
        members[k].append(i)
    buckets = []
    for (lo, hi), idx in zip(ranges, members):
        bleu = BLEU().corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]]).score if idx else None
        buckets.append({"lo": lo, "hi": hi, "n": len(idx), "bleu": bleu})
    return buckets


def score_report(srcs: list[str], hyps: list[str], refs: list[str],
                 bounds: list[int] = DEFAULT_BUCKETS) -> dict:
    """Everything scores.json holds: corpus scores plus BLEU per source-length bucket."""
    return {**corpus_scores(hyps, refs), "buckets": bleu_by_length(srcs, hyps, refs, bounds)}


def load_scores(report_dir: str | os.PathLike) -> dict:
    """Read `report_dir`/scores.json; NmtError naming the path if it is missing or malformed."""
    path = Path(report_dir) / SCORES_FILE
    try:
        scores = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NmtError(f"no scores file at {path} (run evaluation first)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NmtError(f"cannot read scores file {path}: {e}") from None
    if not isinstance(scores, dict) or any(k not in scores for k in REQUIRED_KEYS):
        raise NmtError(f"scores file {path} is not a scores report (needs keys {', '.join(REQUIRED_KEYS)})")
    return scores
