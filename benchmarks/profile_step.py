#!/usr/bin/env python
"""Where a training step's time goes: torch.profiler over N optimiser steps of one study model.

    python benchmarks/profile_step.py configs/study/quick.yaml rnnsearch --steps 8 --out prof.json

The model trains on the study's real batches through the trainer's own step, one thread, after
`--warmup` steps; the JSON holds the top ops by self CPU time, their share of op time, the share
of matmul ops, and the share of wall time spent inside ops (the rest is Python and the loop).
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

from benchmarks.machine import write_json  # noqa: E402

MATMUL_OPS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::mkldnn_rnn_layer",
    "aten::mkldnn_rnn_layer_backward",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", help="study YAML")
    ap.add_argument("model", help="model name in the study")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--out", help="JSON file (default: stdout)")
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from nmt.data.prepared import prepared_corpus
    from nmt.distributed import DistInfo
    from nmt.models import build_model
    from nmt.study import load_study, model_configs
    from nmt.train import Trainer

    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp())
    cfg = model_configs(load_study(args.study), args.study, tmp)[args.model]
    corpus = prepared_corpus(cfg)
    batcher = corpus.batcher(cfg.data, seed=cfg.train.seed)
    order = batcher.epoch(0)
    batches = [batcher.batch(order[i % len(order)]) for i in range(args.warmup + args.steps)]
    torch.manual_seed(cfg.train.seed)
    tok = corpus.tokenizer
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    trainer = Trainer(cfg, model, tok, batcher, [], tmp, DistInfo(device=torch.device("cpu")))
    for b in batches[: args.warmup]:
        trainer.train_step([b])
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for b in batches[args.warmup :]:
            trainer.train_step([b])
    wall = time.perf_counter() - t
    ops = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in ops) / 1e6
    matmul = sum(e.self_cpu_time_total for e in ops if e.key in MATMUL_OPS) / 1e6
    top = sorted(ops, key=lambda e: -e.self_cpu_time_total)[: args.top]
    out = {
        "study": args.study,
        "model": args.model,
        "precision": cfg.train.precision,
        "steps": args.steps,
        "wall_s": wall,
        "op_self_s": total,
        "op_share_of_wall": total / wall,
        "matmul_share_of_ops": matmul / total,
        "target_tokens": sum(b.n_tokens for b in batches[args.warmup :]),
        "top_ops": [
            {
                "op": e.key,
                "calls": e.count,
                "self_s": e.self_cpu_time_total / 1e6,
                "share": e.self_cpu_time_total / 1e6 / total,
            }
            for e in top
        ],
    }
    print(write_json(args.out, out, indent=1) if args.out else json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
