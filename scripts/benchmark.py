#!/usr/bin/env python
"""Training and translation throughput, model FLOP utilisation and peak memory, as JSON + a table.

    python scripts/benchmark.py --out bench.json
    python scripts/benchmark.py --translate runs/multi30k-transformer-local --out bench.json

Training: for each config and precision, a fresh process builds the model and runs `--warmup`
steps, then `--steps` timed optimiser steps on real token-budget batches, `--repeats` times; the
figures are medians over repeats. MFU = (3 x forward matmul FLOPs per target token x target
tokens/s) / the peak FLOP/s of a large torch.matmul of the same dtype measured in the same process.
Translation: each `--translate` checkpoint decodes the config's test split (greedy and beam 5,
batch by tokens), median of `--repeats`. Peak memory is the process's max RSS on CPU and
torch.cuda.max_memory_allocated on GPU. Close other programs first: on a 2-core machine a second
busy process halves (or worse) every figure.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIGS = ["configs/multi30k/rnnsearch_local.yaml", "configs/multi30k/transformer_local.yaml"]


def peak_matmul(dtype, device, n: int = 2048, reps: int = 10) -> float:
    import torch

    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    best = float("inf")
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best


def train_worker(args: argparse.Namespace) -> dict:
    """One config at one precision, in its own process (clean peak-memory figure)."""
    import torch

    from nmt.config import load_config
    from nmt.data.prepared import prepared_corpus
    from nmt.models import build_model
    from nmt.train import autocast_for, loss_fn, peak_memory_mb, resolve_device

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = load_config(args.config, args.set)
    device = resolve_device(cfg.train)
    torch.manual_seed(0)
    corpus = prepared_corpus(cfg)
    tok = corpus.tokenizer
    batcher = corpus.batcher(cfg.data, seed=1)
    order = batcher.epoch(0)
    need = args.warmup + args.steps * args.repeats
    batches = [batcher.batch(order[i % len(order)]) for i in range(need)]
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    autocast = autocast_for(args.precision, device)

    def step(b) -> None:
        b = b.to(device)
        with autocast:
            logits = model(b.src, b.src_mask, b.tgt_in)
        scaler.scale(loss_fn(logits, b.tgt_out, 0.1) / b.n_tokens).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    for b in batches[:args.warmup]:
        step(b)
    runs = []
    for r in range(args.repeats):
        chunk = batches[args.warmup + r * args.steps: args.warmup + (r + 1) * args.steps]
        sync()
        t = time.perf_counter()
        for b in chunk:
            step(b)
        sync()
        el = time.perf_counter() - t
        tgt = sum(b.n_tokens for b in chunk)
        src = sum(b.n_src_tokens for b in chunk)
        runs.append({"tgt_tok_s": tgt / el, "src_tgt_tok_s": (src + tgt) / el,
                     "sent_s": sum(b.src.size(0) for b in chunk) / el})
    chunk = batches[args.warmup:]
    n_sent = sum(b.src.size(0) for b in chunk)
    src_len = sum(b.n_src_tokens for b in chunk) / n_sent
    tgt_len = sum(b.n_tokens for b in chunk) / n_sent
    flops_tok = 3 * model.matmul_flops_per_token(src_len, tgt_len)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    peak = peak_matmul(dtype, device)
    tok_s = statistics.median(r["tgt_tok_s"] for r in runs)
    return {
        "config": args.config, "arch": cfg.model.arch, "precision": args.precision,
        "device": str(device), "threads": torch.get_num_threads(),
        "params": model.num_parameters(), "batch_tokens": cfg.data.batch_tokens,
        "steps": args.steps, "repeats": args.repeats,
        "tgt_tok_s": tok_s,
        "src_tgt_tok_s": statistics.median(r["src_tgt_tok_s"] for r in runs),
        "sent_s": statistics.median(r["sent_s"] for r in runs),
        "tgt_tok_s_runs": [r["tgt_tok_s"] for r in runs],
        "padding": 1 - sum(b.n_tokens + b.n_src_tokens for b in chunk) / sum(b.n_slots for b in chunk),
        "train_flops_per_tgt_token": flops_tok, "achieved_tflops": flops_tok * tok_s / 1e12,
        "peak_matmul_tflops": peak / 1e12, "mfu": flops_tok * tok_s / peak,
        "peak_mem_mb": peak_memory_mb(device),
    }


def translate_worker(args: argparse.Namespace) -> dict:
    import torch

    from nmt.checkpoint import load_model
    from nmt.data.corpus import load_split
    from nmt.train import peak_memory_mb
    from nmt.translate import translate_texts

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg, model, tok, meta = load_model(args.checkpoint, device)
    srcs, _ = load_split(cfg.data, args.split)
    srcs = srcs[:args.sentences]
    out = {"checkpoint": meta["path"], "arch": cfg.model.arch, "split": args.split,
           "sentences": len(srcs), "batch_tokens": cfg.decode.batch_tokens}
    for beam in (1, 5):
        runs, hyps = [], None
        for _ in range(args.repeats):
            t = time.perf_counter()
            hyps = translate_texts(model, tok, srcs, cfg.decode, beam=beam, device=device)
            runs.append(time.perf_counter() - t)
        el = statistics.median(runs)
        n_out = sum(len(h.hyp.tokens) + 1 for h in hyps if h.hyp is not None)
        src_ids = tok.encode_src(srcs)
        limits = [int(cfg.decode.max_len_a * len(s) + cfg.decode.max_len_b) for s in src_ids]
        at_limit = sum(h.hyp is not None and len(h.hyp.tokens) >= lim
                       for h, lim in zip(hyps, limits))
        name = "greedy" if beam == 1 else f"beam{beam}"
        out[name] = {"sent_s": len(srcs) / el, "out_tok_s": n_out / el, "seconds": el,
                     "seconds_runs": runs, "hyps_at_length_limit": at_limit}
    out["peak_mem_mb"] = peak_memory_mb(device)
    return out


def run_child(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, *argv], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"benchmark worker failed: {' '.join(argv)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(result: dict) -> str:
    lines = ["training (median of repeats)",
             "| config | precision | tgt tok/s | src+tgt tok/s | padding | MFU | peak matmul TFLOP/s | peak mem MB |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in result["training"]:
        lines.append(f"| {Path(r['config']).stem} | {r['precision']} | {r['tgt_tok_s']:.0f} | "
                     f"{r['src_tgt_tok_s']:.0f} | {100 * r['padding']:.1f}% | {100 * r['mfu']:.1f}% | "
                     f"{r['peak_matmul_tflops']:.3f} | {r['peak_mem_mb']:.0f} |")
    if result["translation"]:
        lines += ["", "translation (median of repeats)",
                  "| checkpoint | sentences | greedy sent/s | greedy tok/s | beam5 sent/s | beam5 tok/s | at length limit (greedy/beam5) |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in result["translation"]:
            g, b = r["greedy"], r["beam5"]
            lines.append(f"| {r['checkpoint']} | {r['sentences']} | {g['sent_s']:.1f} | "
                         f"{g['out_tok_s']:.0f} | {b['sent_s']:.1f} | {b['out_tok_s']:.0f} | "
                         f"{g['hyps_at_length_limit']}/{b['hyps_at_length_limit']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, help="training configs")
    ap.add_argument("--precisions", nargs="+", default=None,
                    help="default: fp32 bf16 (plus fp16 on CUDA)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for every training config")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per repeat")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    ap.add_argument("--translate", nargs="*", default=[], metavar="CHECKPOINT",
                    help="checkpoints or run dirs to measure translation with")
    ap.add_argument("--split", default="test", help="split role to translate (default: test)")
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--out", default="benchmark.json", help="JSON output file")
    ap.add_argument("--worker", choices=["train", "translate"], help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--precision", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.worker == "train":
        print(json.dumps(train_worker(args)))
        return
    if args.worker == "translate":
        print(json.dumps(translate_worker(args)))
        return

    import torch

    precisions = args.precisions or (["fp32", "bf16", "fp16"] if torch.cuda.is_available()
                                     else ["fp32", "bf16"])
    common = ["--steps", str(args.steps), "--warmup", str(args.warmup), "--repeats",
              str(args.repeats), "--threads", str(args.threads)]
    for s in args.set:
        common += ["--set", s]
    result = {"machine": {"platform": platform.platform(), "processor": platform.processor(),
                          "torch": torch.__version__, "cuda": torch.cuda.is_available(),
                          "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                          "threads": args.threads or torch.get_num_threads()},
              "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
              "training": [], "translation": []}
    if not args.skip_training:
        for config in args.configs:
            for p in precisions:
                print(f"training: {config} {p} ...", file=sys.stderr, flush=True)
                result["training"].append(run_child(["--worker", "train", "--config", config,
                                                     "--precision", p, *common]))
    for ck in args.translate:
        print(f"translation: {ck} ...", file=sys.stderr, flush=True)
        result["translation"].append(run_child(
            ["--worker", "translate", "--checkpoint", ck, "--split", args.split,
             "--sentences", str(args.sentences), "--repeats", str(args.repeats),
             "--threads", str(args.threads)]))
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
