"""`nmt prepare CONFIG`: encode the training split once into the memory-mapped corpus."""

from __future__ import annotations

import argparse
import sys


def register(sub: "argparse._SubParsersAction") -> None:
    pr = sub.add_parser(
        "prepare",
        help="encode the training split once into a cached, "
        "memory-mapped corpus (nmt train does this on first use)",
        description="Read the training split, train the subword models, encode "
        "and filter it with data.workers processes, and store ids and lengths as "
        "Arrow files under data.prepared_dir, keyed by the data and vocab "
        "sections. Every run with the same data and vocab reuses them.",
    )
    pr.add_argument("config", help="YAML config file")
    pr.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set data.workers=4 (repeatable)",
    )
    pr.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    from nmt.config.load import load_config
    from nmt.data.prepared import ensure_prepared, open_prepared
    from nmt.logs import setup_logging

    cfg = load_config(a.config, a.set)
    setup_logging()
    path, built = ensure_prepared(cfg, progress=sys.stderr.isatty())
    print(("prepared now" if built else "already prepared") + "; " + open_prepared(path).summary())
    return 0
