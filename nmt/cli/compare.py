"""`nmt compare`: several reports' BLEU by length in one plot, with significance."""

from __future__ import annotations

import argparse
from pathlib import Path

from nmt.cli.options import count, positive


def register(sub: "argparse._SubParsersAction") -> None:
    c = sub.add_parser(
        "compare",
        help="BLEU-by-length curves of several reports in one plot",
        description="Draw several models' BLEU by source length in one plot and "
        "tables (compare.png, compare.md), with sacreBLEU's paired bootstrap test "
        "of each model against the first, overall and per length bucket "
        "(p-values in compare.md and compare.json, a star in the plot where "
        "p < 0.05). Reports on different test sets are refused.",
    )
    c.add_argument(
        "reports",
        nargs="+",
        metavar="REPORT_OR_RUN",
        help="report directories (holding scores.json) or run directories (their "
        "newest report, or the one --split/--beam pick); the first is the baseline",
    )
    c.add_argument(
        "--out",
        help="output directory (default: RUN/compare of the first run, given as RUN or as its "
        "report RUN/eval_*; for a first report outside a run, compare/ beside it)",
    )
    c.add_argument("--names", help="comma-separated model names (default: run names)")
    c.add_argument("--split", help="in run directories, take the report of this split")
    c.add_argument("--beam", type=positive, help="in run directories, take the report of this beam")
    c.add_argument(
        "--bootstrap",
        type=count,
        default=1000,
        metavar="N",
        help="resamples of the paired bootstrap test against the first model "
        "(0: no test; default: 1000)",
    )
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    from nmt.run_dir import RunDir
    from nmt.scoring.compare import compare_reports

    names = [n.strip() for n in a.names.split(",")] if a.names else None
    out = Path(a.out) if a.out else RunDir.compare_beside(a.reports[0])
    print(compare_reports(a.reports, out, names, split=a.split, beam=a.beam, n_samples=a.bootstrap))
    print(f"plot: {out / 'compare.png'}")
    return 0
