#!/usr/bin/env python
"""Speed of the bootstrap intervals and the paired test, against sacreBLEU's own PairedTest in
the same run (the peer: it materialises every resample's [n, d] statistics), as JSON.

    python benchmarks/benchmark_bootstrap.py --out bench_bootstrap.json

The resampling alone is also timed on the same BLEU statistics, ours (a count matrix times the
statistics) against sacreBLEU's way (index each resample's rows, then sum), with the same draws.
Two systems are made from the references of a 3,000-sentence test set (WMT news valid if
present, else synthetic sentences) by dropping words at random. Timed, each `--repeats` times
(median): sentence-statistics extraction alone (sacreBLEU's cost, paid once either way); our
score_report with and without `--samples` resamples (the difference is the bootstrap, overall and
for each length bucket); our paired_tests (BLEU and chrF, overall and per bucket); sacreBLEU's
PairedTest with the same samples and seed (overall only). The p-values of both are recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import cpu_flags, cpu_model, uptime, write_json  # noqa: E402

WMT = ROOT.parent / "shared" / "data" / "wmt-news-de-en"


def corpus(n: int) -> tuple[list[str], list[str], list[str], list[str], str]:
    import numpy as np

    rng = np.random.default_rng(0)
    if (WMT / "valid.en").is_file():
        srcs = (WMT / "valid.de").read_text(encoding="utf-8").splitlines()[:n]
        refs = (WMT / "valid.en").read_text(encoding="utf-8").splitlines()[:n]
        name = f"wmt-news-de-en valid[:{n}]"
    else:
        refs = [
            " ".join(f"w{int(x)}" for x in rng.integers(0, 2000, size=int(k)))
            for k in rng.integers(3, 60, size=n)
        ]
        srcs, name = refs, f"synthetic {n}"
    a = [" ".join(w for w in r.split() if rng.random() >= 0.40) for r in refs]
    b = [" ".join(w for w in r.split() if rng.random() >= 0.38) for r in refs]
    return srcs, refs, a, b, name


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def machine() -> dict:
    return {
        "cpu": cpu_model(),
        "avx512": any(f.startswith("avx512") for f in cpu_flags()),
        "cores": os.cpu_count(),
        "uptime": uptime(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", help="JSON file (default: stdout)")
    a = ap.parse_args()

    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    from nmt.scoring.metrics import (
        DEFAULT_BUCKETS,
        make_metric,
        paired_tests,
        score_report,
        sentence_stats,
    )

    srcs, refs, hyp_a, hyp_b, name = corpus(a.n)
    t_stats, _ = timed(
        lambda: [sentence_stats(make_metric(m), hyp_a, refs) for m in ("bleu", "chrf")], a.repeats
    )
    t_plain, _ = timed(lambda: score_report(srcs, hyp_a, refs), a.repeats)
    t_boot, scores = timed(
        lambda: score_report(srcs, hyp_a, refs, n_samples=a.samples, seed=a.seed), a.repeats
    )
    t_ours, ours = timed(
        lambda: paired_tests(
            srcs, refs, hyp_a, hyp_b, DEFAULT_BUCKETS, n_samples=a.samples, seed=a.seed
        ),
        a.repeats,
    )
    # The resampling alone, on the same BLEU statistics: ours (counts @ stats) against
    # sacreBLEU's (index every resample's rows, sum them), both with sacreBLEU's draws.
    import numpy as np

    from nmt.scoring.bootstrap import resample_counts, resampled_scores

    bleu = make_metric("bleu")
    stats = sentence_stats(bleu, hyp_a, refs)
    t_resample_ours, ours_samples = timed(
        lambda: resampled_scores(bleu, stats, resample_counts(len(stats), a.samples, a.seed)),
        a.repeats,
    )

    def sacrebleu_way():
        idx = np.random.default_rng(a.seed).choice(len(stats), size=(a.samples, len(stats)))
        rows = np.array(stats, dtype="float32")[idx]
        return np.array([bleu._compute_score_from_stats(r.sum(0)).score for r in rows])

    t_resample_theirs, their_samples = timed(sacrebleu_way, a.repeats)
    os.environ["SACREBLEU_SEED"] = str(a.seed)
    t_theirs, (_, theirs) = timed(
        lambda: PairedTest(
            [("a", hyp_a), ("b", hyp_b)],
            {"BLEU": BLEU(), "chrF2": CHRF()},
            [refs],
            test_type="bs",
            n_samples=a.samples,
        )(),
        a.repeats,
    )
    result = {
        "corpus": name,
        "sentences": len(refs),
        "samples": a.samples,
        "seed": a.seed,
        "repeats": a.repeats,
        "machine": machine(),
        "seconds": {
            "sentence_stats_bleu_chrf": t_stats,
            "score_report_no_bootstrap": t_plain,
            "score_report_with_bootstrap": t_boot,
            "bootstrap_overhead": t_boot - t_plain,
            "paired_tests_ours_overall_and_6_buckets": t_ours,
            "paired_test_sacrebleu_overall_only": t_theirs,
            "bleu_resampling_only_ours": t_resample_ours,
            "bleu_resampling_only_sacrebleu_way": t_resample_theirs,
        },
        "resampled_bleu_equal": bool(np.allclose(ours_samples, their_samples)),
        "bleu": scores["bleu"],
        "bleu_ci": scores["bleu_ci"],
        "p_values": {
            "ours": ours["p"],
            "sacrebleu": {"bleu": theirs["BLEU"][1].p_value, "chrf": theirs["chrF2"][1].p_value},
        },
    }
    print(write_json(a.out, result) if a.out else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
