"""Time one training step of each architecture at the Multi30k config sizes.

Builds seq2seq, rnnsearch and transformer as configured for Multi30k (vocab 8000), then reports
the parameter count and the median forward+backward wall time of one batch of B sentences x L
tokens on each side, in fp32 and under bf16 autocast. Matmul FLOPs use the models' own
`matmul_flops_per_token` (x3 for forward+backward).

    python benchmarks/time_models.py --out time_models.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.machine import machine, write_json  # noqa: E402
from nmt.config.load import model_config  # noqa: E402
from nmt.models import build_model  # noqa: E402

CONFIGS = {
    "seq2seq": model_config("seq2seq", rnn_type="gru", emb_size=256, hidden_size=512, layers=1),
    "rnnsearch": model_config(
        "rnnsearch",
        rnn_type="gru",
        emb_size=256,
        enc_hidden_size=256,
        hidden_size=512,
        layers=1,
        attention="bahdanau",
    ),
    "transformer": model_config(
        "transformer",
        layers=3,
        d_model=256,
        heads=4,
        ff=1024,
        norm="pre",
        tie_embeddings=True,
        tie_output=True,
    ),
}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_step(
    model: torch.nn.Module,
    batch: tuple,
    precision: str,
    device: torch.device,
    warmup: int,
    repeats: int,
) -> float:
    """Median seconds of forward + loss + backward."""
    src, mask, tgt_in, tgt_out = batch
    times = []
    for i in range(warmup + repeats):
        model.zero_grad(set_to_none=True)
        sync(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(src, mask, tgt_in)
            loss = F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=0)
        loss.backward()
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--batch", type=int, default=160, help="sentences per batch")
    ap.add_argument("--length", type=int, default=25, help="tokens per sentence, each side")
    ap.add_argument("--vocab", type=int, default=8000, help="joint vocabulary size")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = default)")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    B, L = args.batch, args.length
    src = torch.randint(4, args.vocab, (B, L), device=device)
    tgt_out = torch.randint(4, args.vocab, (B, L), device=device)
    tgt_in = torch.cat([torch.full((B, 1), 2, device=device), tgt_out[:, :-1]], 1)
    batch = (src, src != 0, tgt_in, tgt_out)

    results = {
        "machine": machine(),
        "device": str(device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "batch": B,
        "length": L,
        "vocab": args.vocab,
        "models": {},
    }
    header = f"{'model':<12} {'params':>11} {'GFLOP/step':>10}"
    header += "".join(f" {p + ' ms':>9} {p + ' TFLOP/s':>13}" for p in args.precisions)
    print(header)
    for name in args.archs:
        model = build_model(CONFIGS[name], args.vocab, args.vocab).to(device).train()
        flops = 3 * model.matmul_flops_per_token(L, L) * B * L
        row = {"params": model.num_parameters(), "train_flops_per_step": flops}
        line = f"{name:<12} {row['params']:>11,} {flops / 1e9:>10.1f}"
        for precision in args.precisions:
            seconds = time_step(model, batch, precision, device, args.warmup, args.repeats)
            row[precision] = {
                "seconds": seconds,
                "tflops": flops / seconds / 1e12,
                "target_tokens_per_second": B * L / seconds,
            }
            line += f" {seconds * 1e3:>9.1f} {flops / seconds / 1e12:>13.3f}"
        results["models"][name] = row
        print(line, flush=True)
    if args.out:
        write_json(args.out, results)


if __name__ == "__main__":
    main()
