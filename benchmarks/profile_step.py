#!/usr/bin/env python
"""Where a training step's time goes: torch.profiler over N optimiser steps of a config or of
one study model.

    python benchmarks/profile_step.py configs/study/quick.yaml rnnsearch --steps 8 --out prof.json
    python benchmarks/profile_step.py configs/multi30k/en-de/transformer_local.yaml --threads 2

The model trains on the real batches through the trainer's own step (one thread unless
--threads), after `--warmup` steps; the JSON (`profile_ops.breakdown`) holds the top ops by self
CPU time, the matmul share, the share of wall time inside ops (the rest is Python and the loop),
and time by phase (forward, backward, optimizer, the rest) and by layer (forward).
Shares are what to read on a busy machine; seconds only on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import machine, write_json  # noqa: E402
from benchmarks.profile_ops import breakdown, label_model  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", help="a training config, or a study YAML with MODEL")
    ap.add_argument("model", nargs="?", help="model name in the study")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--out", help="JSON file (default: stdout)")
    args = ap.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile

    from nmt.config.load import load_config
    from nmt.data.prepared import prepared_corpus
    from nmt.models import build_model
    from nmt.study import load_study, model_configs
    from nmt.training.distributed import DistInfo
    from nmt.training.trainer import Trainer

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp())
    if args.model:
        study = load_study(args.config)
        cfg = model_configs(study, args.config, tmp, args.set)[args.model]
    else:
        cfg = load_config(args.config, [*args.set, f"train.run_dir={tmp}"])
    corpus = prepared_corpus(cfg)
    batcher = corpus.batcher(cfg.data, seed=cfg.train.seed)
    order = batcher.epoch(0)
    batches = [batcher.batch(order[i % len(order)]) for i in range(args.warmup + args.steps)]
    torch.manual_seed(cfg.train.seed)
    tok = corpus.tokenizer
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    label_model(model)
    trainer = Trainer(cfg, model, tok, batcher, [], tmp, DistInfo(device=torch.device("cpu")))
    for b in batches[: args.warmup]:
        trainer.train_step([b])
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for b in batches[args.warmup :]:
            trainer.train_step([b])
    wall = time.perf_counter() - t
    out = {
        "command": "python " + " ".join([Path(__file__).name, *(argv or sys.argv[1:])]),
        "machine": machine(),
        "config": args.config,
        "model": args.model or cfg.model.arch,
        "precision": cfg.train.precision,
        "precision_used": trainer.precision,
        "threads": args.threads,
        "steps": args.steps,
        "target_tokens": sum(b.n_tokens for b in batches[args.warmup :]),
        **breakdown(prof, wall, args.top),
    }
    print(write_json(args.out, out, indent=1) if args.out else json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
