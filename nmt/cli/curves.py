"""`nmt curves`: validation score against training minutes, one line per run."""

from __future__ import annotations

import argparse

from nmt.config.metrics import early_stop_metrics


def register(sub: "argparse._SubParsersAction") -> None:
    c = sub.add_parser(
        "curves",
        help="validation BLEU against training minutes of several runs",
        description="Plot each run's validation score against its training minutes (the "
        "'seconds' of metrics.jsonl's validation rows: the whole training command's "
        "wall-clock, validation included, summed across resumes) into OUT/curves.png, "
        "with a table of each run's best score and when it got there in OUT/curves.md.",
    )
    c.add_argument("runs", nargs="+", metavar="RUN", help="run directories")
    c.add_argument("--metric", choices=list(early_stop_metrics()), default="bleu")
    c.add_argument("--names", help="comma-separated names (default: the run directories' names)")
    c.add_argument("--out", help="output directory (default: RUN/curves of the first run)")
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    from nmt.errors import NmtError
    from nmt.run_dir import RunDir
    from nmt.scoring.curves import curves_table, read_curve, write_curves

    names = a.names.split(",") if a.names else [None] * len(a.runs)
    if len(names) != len(a.runs):
        raise NmtError(f"--names gives {len(names)} names for {len(a.runs)} runs")
    curves = [read_curve(r, a.metric, n) for r, n in zip(a.runs, names)]
    out = write_curves(curves, a.out or RunDir(a.runs[0]).curves, a.metric)
    print(curves_table(curves, a.metric), end="")
    print(f"plot: {out / 'curves.png'}")
    return 0
