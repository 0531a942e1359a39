#!/usr/bin/env python
"""Training and translation throughput, model FLOP utilisation and peak memory, as JSON + a table.

    python benchmarks/benchmark.py --out bench.json
    python benchmarks/benchmark.py --translate runs/multi30k-transformer-local --out bench.json

Training: for each config and precision, a fresh process builds the model and the real
`Trainer`, and calls its `train_step` (the step `nmt train` runs: schedule, clipping, GradScaler,
its one host read) on the batches the training loop builds, `--warmup` times, then `--steps`
timed steps, `--repeats` times; the figures are medians over repeats. MFU = (3 x forward matmul
FLOPs per target token x target tokens/s) / the peak FLOP/s of the same dtype measured in the
same process (the best of several large matmuls after warm-up; CUDA events on a GPU). Host syncs
per step: torch.cuda.set_sync_debug_mode on a GPU, reads by nmt's code on a CPU. The machine
section holds the CPU model, the CPU flags that decide bf16 speed, the load, and the fp32/bf16
matmul peaks.
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
sys.path.insert(0, str(ROOT))

from benchmarks.machine import cpu_model, load_avg, write_json  # noqa: E402

DEFAULT_CONFIGS = [
    "configs/multi30k/rnnsearch_local.yaml",
    "configs/multi30k/transformer_local.yaml",
]


def cpu_info() -> dict:
    """lscpu's model name, the CPU flags that decide bf16 speed, and the load (timings on a
    shared machine are only comparable within one run)."""
    from nmt.precision import cpu_flags

    wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8")
    return {
        "cpu_model": cpu_model(),
        "cpu_flags": [f for f in wanted if f in cpu_flags()],
        "load_avg": load_avg(),
    }


def peak_matmul(dtype, device, n: int = 0, reps: int = 5, warmup: int = 2) -> float:
    """FLOP/s of the best of `reps` large square matmuls after `warmup` ones (CUDA events on a
    GPU, so launch and sync overheads stay out). n defaults to 8192 on a GPU, 2048 on a CPU
    (512 for bf16 on a CPU without bf16 units, where it is emulated and slow)."""
    import torch

    from nmt.precision import bf16_is_fast

    if not n:
        n = (
            8192
            if device.type == "cuda"
            else (512 if dtype == torch.bfloat16 and not bf16_is_fast(device) else 2048)
        )
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(warmup):
        a @ b
    best = float("inf")
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a @ b
            end.record()
            end.synchronize()
            el = start.elapsed_time(end) / 1000
        else:
            t = time.perf_counter()
            a @ b
            el = time.perf_counter() - t
        best = min(best, el)
    return 2 * n**3 / best


class SyncCounter:
    """Device -> host syncs: on CUDA from torch.cuda.set_sync_debug_mode warnings; on a CPU, the
    reads (item, tolist, bool, float, ...) made by nmt's own code, the same hook the tests use."""

    READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__")

    def __init__(self, device) -> None:
        self.device, self.count = device, 0

    def __enter__(self) -> "SyncCounter":
        import warnings

        import torch

        if self.device.type == "cuda":
            torch.cuda.set_sync_debug_mode("warn")
            self._warn = warnings.catch_warnings(record=True)
            self._log = self._warn.__enter__()
            warnings.simplefilter("always")
            return self
        nmt_dir = str(ROOT / "nmt")
        self._orig = {n: getattr(torch.Tensor, n) for n in self.READS}

        def wrap(fn):
            def counted(t, *a, **k):
                if sys._getframe(1).f_code.co_filename.startswith(nmt_dir):
                    self.count += 1
                return fn(t, *a, **k)

            return counted

        for n, fn in self._orig.items():
            setattr(torch.Tensor, n, wrap(fn))
        return self

    def __exit__(self, *exc) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.set_sync_debug_mode(0)
            self.count = sum("synchroniz" in str(w.message) for w in self._log)
            self._warn.__exit__(*exc)
            return
        for n, fn in self._orig.items():
            setattr(torch.Tensor, n, fn)


def train_worker(args: argparse.Namespace) -> dict:
    """One config at one precision, in its own process (clean peak-memory figure), timing the
    real `Trainer.train_step` on the batches the training loop would build."""
    import tempfile

    import torch

    from nmt.config.load import load_config
    from nmt.data.prepared import prepared_corpus
    from nmt.models import build_model
    from nmt.precision import DTYPES
    from nmt.training.distributed import DistInfo
    from nmt.training.trainer import Trainer, peak_memory_mb, resolve_device

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.fp32_math != "ieee":  # oneDNN's own low-precision math on fp32 tensors (no casts)
        torch.backends.mkldnn.matmul.fp32_precision = args.fp32_math
        torch.backends.mkldnn.rnn.fp32_precision = args.fp32_math
    cfg = load_config(
        args.config, [*args.set, f"train.precision={args.precision}", "train.progress=false"]
    )
    device = resolve_device(cfg.train)
    torch.manual_seed(0)
    corpus = prepared_corpus(cfg)
    tok = corpus.tokenizer
    batcher = corpus.batcher(cfg.data, seed=cfg.train.seed)
    order = batcher.epoch(0)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    run_dir = Path(args.save_run or tempfile.mkdtemp(prefix="nmt-bench-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(cfg, model, tok, batcher, [], run_dir, DistInfo(device=device))
    groups = [
        order[i : i + cfg.train.accum_steps] for i in range(0, len(order), cfg.train.accum_steps)
    ]
    used: list = []

    def step(i: int) -> None:
        data = [batcher.batch(ix) for ix in groups[i % len(groups)]]
        used.extend(data)
        trainer.train_step(data)
        trainer.p.step += 1

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    t_warm = time.perf_counter()
    for i in range(args.warmup):  # with train.compile, the compilation happens here
        step(i)
    if cfg.data.shapes:  # static graphs: one step on each batch shape the timed steps meet
        seen: set = set()
        for i in range(args.warmup + args.repeats * args.steps):
            batches = (batcher.batch(ix) for ix in groups[i % len(groups)])
            key = tuple((*b.src.shape, *b.tgt_in.shape) for b in batches)
            if key not in seen and i >= args.warmup:
                step(i)
            seen.add(key)
    sync()
    warmup_s = time.perf_counter() - t_warm
    runs, syncs = [], []
    for r in range(args.repeats):
        first = args.warmup + r * args.steps
        used.clear()
        sync()
        with SyncCounter(device) as counter:
            t = time.perf_counter()
            for i in range(first, first + args.steps):
                step(i)
            sync()
            el = time.perf_counter() - t
        syncs.append(counter.count / args.steps)
        tgt = sum(b.n_tokens for b in used)
        src = sum(b.n_src_tokens for b in used)
        runs.append(
            {
                "tgt_tok_s": tgt / el,
                "src_tgt_tok_s": (src + tgt) / el,
                "sent_s": sum(b.src.size(0) for b in used) / el,
                "padding": 1 - (src + tgt) / sum(b.n_slots for b in used),
                "sent": sum(b.src.size(0) for b in used),
                "src": src,
                "tgt": tgt,
            }
        )
    if args.save_run:
        trainer.save(best=True)
    n_sent = sum(r["sent"] for r in runs)
    src_len, tgt_len = sum(r["src"] for r in runs) / n_sent, sum(r["tgt"] for r in runs) / n_sent
    flops_tok = 3 * model.matmul_flops_per_token(src_len, tgt_len)
    dtype = DTYPES[trainer.precision]
    peak = peak_matmul(dtype, device)
    tok_s = statistics.median(r["tgt_tok_s"] for r in runs)
    return {
        "config": args.config,
        "arch": cfg.model.arch,
        "precision": args.precision,
        "precision_used": trainer.precision,
        "sets": args.set,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "params": model.num_parameters(),
        "batch_tokens": cfg.data.batch_tokens,
        "steps": args.steps,
        "repeats": args.repeats,
        "compile": cfg.train.compile,
        "fp32_math": args.fp32_math,
        "warmup_steps": args.warmup,
        "warmup_s": warmup_s,
        "tgt_tok_s": tok_s,
        "src_tgt_tok_s": statistics.median(r["src_tgt_tok_s"] for r in runs),
        "sent_s": statistics.median(r["sent_s"] for r in runs),
        "tgt_tok_s_runs": [r["tgt_tok_s"] for r in runs],
        "padding": statistics.median(r["padding"] for r in runs),
        "host_syncs_per_step": max(syncs),
        "train_flops_per_tgt_token": flops_tok,
        "achieved_tflops": flops_tok * tok_s / 1e12,
        "peak_matmul_tflops": peak / 1e12,
        "mfu": flops_tok * tok_s / peak,
        "peak_mem_mb": peak_memory_mb(device),
    }


def translate_worker(args: argparse.Namespace) -> dict:
    import torch

    from nmt.checkpoint import load_model
    from nmt.data.corpus import load_split
    from nmt.inference import decoding_device
    from nmt.precision import autocast_for, decode_precision
    from nmt.text_translation import translate_texts
    from nmt.training.trainer import peak_memory_mb

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg, model, tok, meta = load_model(args.checkpoint, "cpu")
    device = decoding_device(None, cfg)  # what `nmt translate` uses by default
    model.to(device)
    srcs, _ = load_split(cfg.data, args.split)
    srcs = srcs[: args.sentences]
    out = {
        "checkpoint": meta["path"],
        "arch": cfg.model.arch,
        "split": args.split,
        "sentences": len(srcs),
        "batch_tokens": cfg.decode.batch_tokens,
        "device": str(device),
        "precision": decode_precision(cfg.train.precision, device),
    }
    for beam in (1, 5):
        runs, hyps = [], None
        for _ in range(args.repeats):
            t = time.perf_counter()
            with autocast_for(decode_precision(cfg.train.precision, device), device):
                hyps = translate_texts(model, tok, srcs, cfg.decode, beam=beam, device=device)
            runs.append(time.perf_counter() - t)
        el = statistics.median(runs)
        n_out = sum(len(h.hyp.tokens) + 1 for h in hyps if h.hyp is not None)
        src_ids = tok.encode_src(srcs)
        limits = [int(cfg.decode.max_len_a * len(s) + cfg.decode.max_len_b) for s in src_ids]
        at_limit = sum(
            h.hyp is not None and len(h.hyp.tokens) >= lim for h, lim in zip(hyps, limits)
        )
        name = "greedy" if beam == 1 else f"beam{beam}"
        out[name] = {
            "sent_s": len(srcs) / el,
            "out_tok_s": n_out / el,
            "seconds": el,
            "seconds_runs": runs,
            "hyps_at_length_limit": at_limit,
        }
    out["peak_mem_mb"] = peak_memory_mb(device)
    return out


def run_child(argv: list[str]) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, *argv], cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"benchmark worker failed: {' '.join(argv)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(result: dict) -> str:
    lines = [
        "training (median of repeats)",
        "| config | precision | tgt tok/s | src+tgt tok/s | padding | MFU | peak matmul TFLOP/s | syncs/step | peak mem MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["training"]:
        lines.append(
            f"| {Path(r['config']).stem} | {r['precision_used']} | {r['tgt_tok_s']:.0f} | "
            f"{r['src_tgt_tok_s']:.0f} | {100 * r['padding']:.1f}% | {100 * r['mfu']:.1f}% | "
            f"{r['peak_matmul_tflops']:.3f} | {r['host_syncs_per_step']:.1f} | "
            f"{r['peak_mem_mb']:.0f} |"
        )
    if result["translation"]:
        lines += [
            "",
            "translation (median of repeats)",
            "| checkpoint | sentences | greedy sent/s | greedy tok/s | beam5 sent/s | beam5 tok/s | at length limit (greedy/beam5) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in result["translation"]:
            g, b = r["greedy"], r["beam5"]
            lines.append(
                f"| {r['checkpoint']} | {r['sentences']} | {g['sent_s']:.1f} | "
                f"{g['out_tok_s']:.0f} | {b['sent_s']:.1f} | {b['out_tok_s']:.0f} | "
                f"{g['hyps_at_length_limit']}/{b['hyps_at_length_limit']} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, help="training configs")
    ap.add_argument(
        "--precisions", nargs="+", default=None, help="default: fp32 bf16 (plus fp16 on CUDA)"
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every training config",
    )
    ap.add_argument("--steps", type=int, default=10, help="timed steps per repeat")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument(
        "--fp32-math",
        default="ieee",
        choices=["ieee", "bf16"],
        help="CPU matmuls and RNNs on fp32 tensors: exact (ieee) or in oneDNN's bf16 math "
        "(torch.backends.mkldnn.*.fp32_precision); use with --precisions fp32",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    ap.add_argument(
        "--translate",
        nargs="*",
        default=[],
        metavar="CHECKPOINT",
        help="checkpoints or run dirs to measure translation with",
    )
    ap.add_argument("--split", default="test", help="split role to translate (default: test)")
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--out", default="benchmark.json", help="JSON output file")
    ap.add_argument("--worker", choices=["train", "translate"], help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--precision", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", help=argparse.SUPPRESS)
    ap.add_argument(
        "--save-run",
        help="(with one config and precision) save the benchmarked "
        "model's checkpoint into this directory, e.g. to time its translation",
    )
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.worker == "train":
        print(json.dumps(train_worker(args)))
        return
    if args.worker == "translate":
        print(json.dumps(translate_worker(args)))
        return

    import torch

    precisions = args.precisions or (
        ["fp32", "bf16", "fp16"] if torch.cuda.is_available() else ["fp32", "bf16"]
    )
    common = [
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--repeats",
        str(args.repeats),
        "--threads",
        str(args.threads),
    ]
    for s in args.set:
        common += ["--set", s]
    if args.save_run:
        common += ["--save-run", args.save_run]
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    result = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            **cpu_info(),
            "torch": torch.__version__,
            "cuda": torch.cuda.is_available(),
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "threads": args.threads or torch.get_num_threads(),
            "peak_matmul_tflops": {
                name: peak_matmul(dt, device) / 1e12
                for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16))
            },
        },
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "training": [],
        "translation": [],
    }
    if not args.skip_training:
        for config in args.configs:
            for p in precisions:
                print(f"training: {config} {p} ...", file=sys.stderr, flush=True)
                result["training"].append(
                    run_child(["--worker", "train", "--config", config, "--precision", p, *common])
                )
    for ck in args.translate:
        print(f"translation: {ck} ...", file=sys.stderr, flush=True)
        result["translation"].append(
            run_child(
                [
                    "--worker",
                    "translate",
                    "--checkpoint",
                    ck,
                    "--split",
                    args.split,
                    "--sentences",
                    str(args.sentences),
                    "--repeats",
                    str(args.repeats),
                    "--threads",
                    str(args.threads),
                ]
            )
        )
    write_json(args.out, result)
    print(table(result))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
