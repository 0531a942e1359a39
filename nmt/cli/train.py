"""`nmt train CONFIG`: train (or `--resume`) a run; `--dry-run` reports the data."""

from __future__ import annotations

import argparse
import sys


def register(sub: "argparse._SubParsersAction") -> None:
    t = sub.add_parser(
        "train",
        help="train a model from a YAML config",
        description="Train a model. Under torchrun the same command trains with "
        "DistributedDataParallel: torchrun --nproc_per_node=N -m nmt train CONFIG",
    )
    t.add_argument("config", help="YAML config file")
    t.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set train.lr=0.0005 (repeatable)",
    )
    t.add_argument("--resume", action="store_true", help="continue the run in train.run_dir")
    t.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    t.add_argument(
        "--dry-run",
        action="store_true",
        help="load data, train subwords, build batches, print statistics; no training",
    )
    t.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    from nmt.config.load import load_config
    from nmt.jobs.train import data_report, train
    from nmt.logs import setup_logging

    cfg = load_config(a.config, a.set)
    setup_logging()
    if a.dry_run:
        print(data_report(cfg, progress=sys.stderr.isatty(), where=a.config))
        return 0
    result = train(
        cfg,
        overwrite=a.overwrite,
        resume=a.resume,
        where=a.config,
        progress_bar=sys.stderr.isatty(),
    )
    print(f"run directory: {result.run}")
    if result.interrupted:
        return _interrupted(a, result)
    return 0


def _interrupted(a: argparse.Namespace, result) -> int:
    """Say where the work is and how to continue it; exit as a process killed by the signal
    would (128 + its number: 130 for SIGINT, 143 for SIGTERM), so a scheduler can tell a
    preempted run from a finished one."""
    import os
    import re
    import shlex
    import signal

    from nmt.checkpoint import step_checkpoints

    found = re.search(r"SIG[A-Z]+", result.stop_reason)
    sig = signal.Signals[found.group()] if found else signal.SIGTERM  # signalled elsewhere
    if os.environ.get("RANK", "0") == "0":
        ckpts = step_checkpoints(result.run)
        where = ckpts[-1] if ckpts else result.run
        cmd = ["nmt", "train", a.config, *(f"--set={kv}" for kv in a.set), "--resume"]
        print(
            f"nmt: training {result.stop_reason}; checkpoint saved at {where}\n"
            f"nmt: continue with: {shlex.join(cmd)}",
            file=sys.stderr,
        )
    return 128 + sig.value
