"""`nmt average`: the mean parameters of several checkpoints, as one checkpoint."""

from __future__ import annotations

import argparse

from nmt.cli.options import positive


def register(sub: "argparse._SubParsersAction") -> None:
    av = sub.add_parser(
        "average",
        help="average the parameters of several checkpoints",
        description="Average model parameters (in fp32) of the last N step "
        "checkpoints of a run, or of the given checkpoints, into one checkpoint "
        "usable wherever a checkpoint is.",
    )
    av.add_argument(
        "checkpoints",
        nargs="+",
        metavar="RUN_OR_CKPT",
        help="a run directory with --last, else checkpoint files",
    )
    av.add_argument("--last", type=positive, metavar="N", help="the run's last N step checkpoints")
    av.add_argument("-o", "--output", required=True, help="checkpoint to write")
    av.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    from nmt.checkpoint import average_checkpoints, checkpoints_to_average

    paths = checkpoints_to_average(a.checkpoints, a.last)
    average_checkpoints(paths, a.output)
    print(f"averaged {len(paths)} checkpoint(s) -> {a.output}")
    return 0
