#!/usr/bin/env python
"""Does a new training step learn what an old one did? One recipe trained twice with the same
seed, once by an older commit (a git worktree of it, as benchmarks/ab_step.py makes) and once by
this tree, side by side with one thread each, every validation's checkpoint kept:

    python benchmarks/same_learning.py --base 361dd60 --config configs/multi30k/de-en/transformer_local.yaml --steps 1500 3000 --out DIR

or, for two runs trained already (each with a checkpoint at every step named):

    python benchmarks/same_learning.py --old RUN_OLD --new RUN_NEW --steps 1500 3000 --out DIR

Each run's checkpoint of each named step is scored with this tree's `nmt evaluate` on the
validation split (one decoder for both, so only the training step differs), the new against the
old with `nmt compare`'s paired bootstrap. The verdict of a step: the new BLEU within
--max-diff of the old and inside the old's 95% bootstrap interval. DIR gets the runs (with
--base), the reports, same_learning.json (the machine, each run's wall-clock seconds, the scores
and verdicts) and same_learning.png (training loss, validation loss and BLEU of both runs by
step, overlaid).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine, write_json  # noqa: E402


def metrics(run: Path) -> list[dict]:
    """The rows of a run's metrics.jsonl (training and validation; the last is its stop)."""
    with open(run / "metrics.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def nmt(*args: str) -> None:
    """One `nmt` command of this tree, in a process of its own; its error ends the script."""
    done = subprocess.run(
        [sys.executable, "-m", "nmt", *args], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"error: nmt {' '.join(args)} failed:\n{done.stderr.strip()[-2000:]}")


def train_commands(old_tree: Path, config: Path, out: Path) -> dict[str, tuple[list[str], Path]]:
    """Each side's `nmt train` of this tree's config file (relative paths in it resolve against
    its own folder, so both read the same data) and the folder it runs in: one thread each, since
    they train side by side, and every checkpoint kept (a run never writes more than 10,000)."""
    cmds = {}
    for side, tree in (("old", old_tree), ("new", ROOT)):
        sets = [f"train.run_dir={out.resolve() / side}", "train.keep_last=10000", "train.threads=1"]
        argv = [sys.executable, "-m", "nmt", "train", str(config.resolve())]
        cmds[side] = ([*argv, *(x for s in sets for x in ("--set", s))], tree)
    return cmds


def train_both(args: argparse.Namespace) -> tuple[Path, Path]:
    """The old and the new run of --config, trained at once; their logs in DIR/SIDE.log."""
    from benchmarks.ab_step import worktree

    procs = {}
    for side, (cmd, tree) in train_commands(worktree(args.base), args.config, args.out).items():
        log = open(args.out / f"{side}.log", "w", encoding="utf-8")  # noqa: SIM115 (closed below)
        procs[side] = (subprocess.Popen(cmd, cwd=tree, stdout=log, stderr=subprocess.STDOUT), log)
    for side, (proc, log) in procs.items():
        proc.wait()
        log.close()
        if proc.returncode:
            raise SystemExit(f"error: the {side} run failed: see {args.out / f'{side}.log'}")
    return args.out / "old", args.out / "new"


def score_step(old: Path, new: Path, step: int, args: argparse.Namespace) -> dict:
    """Both runs' step checkpoints on the validation split, the new against the old."""
    reports = {}
    for side, run in (("old", old), ("new", new)):
        checkpoint = run / "checkpoints" / f"step_{step}.pt"
        if not checkpoint.is_file():
            raise SystemExit(
                f"error: {checkpoint} not found (train with keep_last large enough to keep step {step})"
            )
        reports[side] = args.out / f"{side}_step{step}"
        extra = [] if args.beam is None else ["--beam", str(args.beam)]
        nmt(
            "evaluate",
            str(checkpoint),
            "--split",
            args.split,
            "--report",
            str(reports[side]),
            *extra,
        )
    compare_dir = args.out / f"compare_step{step}"
    nmt(
        "compare",
        str(reports["old"]),
        str(reports["new"]),
        "--names",
        "old,new",
        "--out",
        str(compare_dir),
    )
    old_s, new_s = (json.loads((reports[s] / "scores.json").read_text()) for s in ("old", "new"))
    p_value = json.loads((compare_dir / "compare.json").read_text())["tests"]["new"]["p"]["bleu"]
    low, high = old_s["bleu_ci"]
    diff = new_s["bleu"] - old_s["bleu"]
    return {
        "step": step,
        "beam": new_s["beam"],
        "old": {"bleu": old_s["bleu"], "bleu_ci": old_s["bleu_ci"], "chrf": old_s["chrf"]},
        "new": {"bleu": new_s["bleu"], "bleu_ci": new_s["bleu_ci"], "chrf": new_s["chrf"]},
        "new_minus_old": diff,
        "paired_p": p_value,
        "same": abs(diff) <= args.max_diff and low <= new_s["bleu"] <= high,
    }


def plot(rows: dict[str, list[dict]], path: Path) -> None:
    """Training loss, validation loss and validation BLEU by step, both runs on each panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("train", "loss", "training loss"),
        ("valid", "loss", "validation loss"),
        ("valid", "bleu", "validation BLEU"),
    )
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (split, key, title) in zip(axes, panels):
        for side, style in (("old", "-"), ("new", "--")):
            points = [
                (r["step"], r[key]) for r in rows[side] if r.get("split") == split and key in r
            ]
            ax.plot(*zip(*points), style, label=side, marker="." if split == "valid" else None)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="train both runs: the old step's commit (e.g. 361dd60)")
    ap.add_argument("--config", type=Path, help="with --base: the recipe both runs train")
    ap.add_argument("--old", type=Path, help="a run directory trained by the old step")
    ap.add_argument("--new", type=Path, help="a run directory trained by this tree's step")
    ap.add_argument("--steps", type=int, nargs="+", required=True, help="checkpoint steps to score")
    ap.add_argument("--split", default="valid", help="split role to score (default: valid)")
    ap.add_argument(
        "--beam", type=int, default=None, help="beam size (default: the run's decode.beam)"
    )
    ap.add_argument(
        "--max-diff", type=float, default=1.0, help="the most BLEU the two may differ by"
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if bool(args.base and args.config) == bool(args.old and args.new):
        ap.error("give either --base and --config (train both runs) or --old and --new")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.base:
        args.old, args.new = train_both(args)
    rows = {"old": metrics(args.old), "new": metrics(args.new)}
    seconds = {
        s: max((r["seconds"] for r in rows[s] if "seconds" in r), default=None) for s in rows
    }
    result = {
        "machine": machine(),
        "runs": {"old": str(args.old), "new": str(args.new)},
        "train_seconds": seconds,
        "steps": [score_step(args.old, args.new, step, args) for step in args.steps],
    }
    plot(rows, args.out / "same_learning.png")
    write_json(args.out / "same_learning.json", result)
    for s in result["steps"]:
        print(
            f"step {s['step']}: old {s['old']['bleu']:.2f} {s['old']['bleu_ci']}, new {s['new']['bleu']:.2f} "
            f"(p = {s['paired_p']}): {'same' if s['same'] else 'NOT the same'}"
        )
    return result


if __name__ == "__main__":
    main()
