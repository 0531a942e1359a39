#!/usr/bin/env python
"""The training step of an older commit against this tree's, A/B, in one invocation.

    python benchmarks/ab_step.py --base 361dd60 --rounds 3 --out ab-step.json

The base commit is checked out once as a git worktree (outside the repository, reused by later
runs). Each round runs, for every target, one worker process of each tree, alternating which
goes first, so drift in the machine's speed (another process, the clock) falls on both sides
alike. A worker is `benchmarks/benchmark.py --worker train` of its own tree: it builds the model
and the real Trainer and times `--steps` optimiser steps after `--warmup` ones (the warm-up holds
any compilation; its seconds are reported apart). Throughput is real target tokens per second
(padding not counted); MFU is against the matmul peak of the dtype used, measured in the same
worker; peak memory is the worker's max RSS. The JSON holds every run, the medians, the
new/old ratio of the medians per target and the machine.

Targets are the Europarl study's Transformer, rnnsearch and seq2seq (configs/study/europarl.yaml)
and the Multi30k de->en Transformer recipe; each is written as a plain config both trees read.
Close everything else first: on two cores a second busy process halves every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine, write_json  # noqa: E402

TARGETS = {
    "europarl-transformer": ("configs/study/europarl.yaml", "transformer"),
    "europarl-rnnsearch": ("configs/study/europarl.yaml", "rnnsearch"),
    "europarl-seq2seq": ("configs/study/europarl.yaml", "seq2seq"),
    "multi30k-de-en-transformer": ("configs/multi30k/de-en/transformer_local.yaml", None),
}


def worktree(commit: str) -> Path:
    """A checkout of `commit` beside the system's temporary files (made once, then reused)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{commit}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if sha.returncode:
        raise SystemExit(f"error: --base {commit!r} is not a commit of this repository")
    path = Path(tempfile.gettempdir()) / f"nmt-ab-{sha.stdout.strip()[:12]}"
    if not (path / "nmt").is_dir():
        subprocess.run(
            ["git", "worktree", "add", "--force", "--detach", str(path), sha.stdout.strip()],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    return path


def plain_config(config: str, model: str | None, out_dir: Path) -> Path:
    """The target as one config file both trees read: a config file as it is (its relative
    paths are resolved against its own folder, in this tree); a study model as its base merged
    with its own sections (only keys the study file names, so no key newer than the base
    commit appears), with the data path made absolute."""
    if model is None:
        return (ROOT / config).resolve()
    from nmt.config.load import merge_sections
    from nmt.study import load_study

    study = load_study(ROOT / config)
    raw = merge_sections(study.get("base") or {}, study["models"][model] or {})
    data = raw.get("data", {})
    if "path" in data:
        data["path"] = str((ROOT / data["path"]).resolve())
    out_dir.mkdir(parents=True, exist_ok=True)
    file = out_dir / f"{model}.yaml"
    file.write_text(yaml.safe_dump(raw, sort_keys=False), "utf-8")
    return file


def run_worker(tree: Path, config: Path, args: argparse.Namespace, new: bool) -> dict:
    cmd = [sys.executable, str(tree / "benchmarks" / "benchmark.py"), "--worker", "train"]
    precision = args.new_precision if new and args.new_precision else args.precision
    cmd += ["--config", str(config), "--precision", precision, "--steps", str(args.steps)]
    cmd += ["--warmup", str(args.warmup), "--repeats", "1", "--threads", str(args.threads)]
    for s in args.new_set if new else []:
        cmd += ["--set", s]
    if new and args.new_fp32_math:
        cmd += ["--fp32-math", args.new_fp32_math]
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr[-3000:])
        raise SystemExit(f"error: the worker of {tree} failed on {config}")
    return json.loads(done.stdout.strip().splitlines()[-1])


KEPT = ("tgt_tok_s", "warmup_s", "padding", "mfu", "peak_matmul_tflops", "peak_mem_mb")


def summary(runs: dict[str, list[dict]]) -> dict:
    """Medians of each side and the new/old ratio of the medians."""
    out = {}
    for side, rows in runs.items():
        out[side] = {k: statistics.median(r[k] for r in rows) for k in KEPT}
        out[side]["precision_used"] = rows[0]["precision_used"]
        out[side]["compile"] = rows[0]["compile"]
        out[side]["fp32_math"] = rows[0].get("fp32_math", "ieee")
    out["ratio_tgt_tok_s"] = out["new"]["tgt_tok_s"] / out["old"]["tgt_tok_s"]
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--base", default="361dd60", help="the old commit (default: 361dd60)")
    ap.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    ap.add_argument("--rounds", type=int, default=3, help="old/new pairs per target")
    ap.add_argument("--steps", type=int, default=8, help="timed optimiser steps per worker")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads, both sides")
    ap.add_argument("--precision", default="auto", help="train.precision, both sides")
    ap.add_argument(
        "--new-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for the new side only (e.g. train.compile=false)",
    )
    ap.add_argument("--new-precision", help="train.precision of the new side (default: same)")
    ap.add_argument(
        "--new-fp32-math",
        choices=["ieee", "bf16"],
        help="the new side's fp32 CPU math (benchmark.py --fp32-math): oneDNN's bf16 math on "
        "fp32 tensors against the old side's autocast, with --new-precision fp32",
    )
    ap.add_argument("--out", default="ab-step.json", help="JSON output file")
    args = ap.parse_args(argv)
    old = worktree(args.base)
    result = {
        "command": "python " + " ".join([Path(__file__).name, *(argv or sys.argv[1:])]),
        "machine": machine(),
        "base": args.base,
        "threads": args.threads,
        "targets": {},
    }
    with tempfile.TemporaryDirectory(prefix="nmt-ab-") as tmp:
        configs = {name: plain_config(*TARGETS[name], Path(tmp) / name) for name in args.targets}
        runs = {name: {"old": [], "new": []} for name in args.targets}
        for r in range(args.rounds):
            for name, config in configs.items():
                order = [("old", old), ("new", ROOT)]
                for side, tree in order if r % 2 == 0 else order[::-1]:
                    print(f"round {r + 1}: {name} {side} ...", file=sys.stderr, flush=True)
                    runs[name][side].append(run_worker(tree, config, args, side == "new"))
        for name in args.targets:
            result["targets"][name] = {"runs": runs[name], **summary(runs[name])}
    write_json(args.out, result)
    for name, t in result["targets"].items():
        print(
            f"{name}: old {t['old']['tgt_tok_s']:.0f} tok/s, new {t['new']['tgt_tok_s']:.0f} "
            f"tok/s: {t['ratio_tgt_tok_s']:.2f}x (padding {100 * t['new']['padding']:.1f}%, "
            f"MFU {100 * t['old']['mfu']:.1f}% -> {100 * t['new']['mfu']:.1f}%)"
        )
    return result


if __name__ == "__main__":
    main()
