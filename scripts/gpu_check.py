#!/usr/bin/env python
"""The one-shot GPU check (run through scripts/gpu_check.sh): one JSON file and a table.

1. N steps of each architecture in fp32, bf16 and fp16 (fp16 skipped with --cpu) from the same
   initial weights on the same batches: loss against the fp32 curve, encoder gradient norms
   against fp32, GradScaler scale and skipped steps, the dtype the RNN ran in, the SDPA backend;
2. torchrun --nproc_per_node=min(2, GPUs) (NCCL; gloo on 2 CPU processes with --cpu): a NaN
   injected on the last rank at its 3rd forward pass, parameters identical across ranks at the
   end, then a resume;
3. benchmarks/benchmark.py on a transformer-base config (d_model 512, 6+6 layers, 8 heads, ff 2048,
   ~25k-token batches, bf16; a small one with --cpu): target tokens/s, MFU against the same-run
   matmul peak, host syncs per step, and translation sentences/s greedy and beam 5;
4. the same training benchmark with `train.compile: true` (the compiled step's tokens/s, MFU,
   host syncs and its compile-holding warm-up), so a lease tells `train.compile: auto` whether
   compiling wins on that GPU (nmt/training/compile.py); then again on batches of 4 fixed shapes
   (`data.shapes`, static graphs captured as CUDA graphs; 1 shape with --cpu);
5. pytest with CUDA visible, last (with --cpu: a few quick precision tests; CI runs the suite
   itself), each failure named.
Targets (GPU): transformer-base bf16 MFU >= 30% (stretch 40%) of the bf16 peak, eager or
compiled, <= 1 host sync per step,
fp16/bf16 loss within 2% of fp32 after the steps. Exit code 1 when a check fails to run or
breaks an invariant (non-finite loss, ranks disagree, resume fails); missed speed targets are
reported, not fatal.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
# The compiled phases: symbolic shapes over token-bucketed batches, and static graphs over a few
# fixed batch shapes (data.shapes; one graph per shape and per shape's shorter last batch, CUDA
# graphs on a GPU). The CPU mode keeps one shape: each static graph costs a compilation.
COMPILED = {
    "compiled": "train.compile: true",
    "static": "train.compile: true, data.shapes: fixed batch shapes",
}
STATIC_SHAPES = {False: 4, True: 1}
BASE = [
    "model.d_model=512",
    "model.heads=8",
    "model.ff=2048",
    "model.layers=6",
    "data.batch_tokens=25000",
    "train.accum_steps=1",
]


def configs(cpu: bool) -> dict[str, tuple[str, list[str]]]:
    """arch -> (config, overrides): Multi30k where it is on disk (and not --cpu), else toy."""
    if not cpu and (MULTI30K / "train.de").is_file():
        return {
            a: (f"configs/multi30k/{a}_local.yaml", [])
            for a in ("seq2seq", "rnnsearch", "transformer")
        }
    # small enough for CI (bf16 is emulated, and slow, on CPUs without bf16 units)
    small = [
        "data.synthetic.train=300",
        "data.synthetic.valid=40",
        "data.batch_tokens=400",
        "vocab.size=300",
        "train.threads=1",
    ]
    rnn = ["model.emb_size=32", "model.hidden_size=64"]
    return {
        "seq2seq": ("configs/toy/seq2seq.yaml", small + rnn),
        "rnnsearch": ("configs/toy/rnnsearch.yaml", small + rnn + ["model.enc_hidden_size=32"]),
        "transformer": (
            "configs/toy/transformer.yaml",
            small + ["model.d_model=32", "model.ff=64", "model.heads=2"],
        ),
    }


def run(
    cmd: list[str], timeout: float, env: dict | None = None, stdout_last: bool = False
) -> tuple[int, str, float]:
    """(exit code, the output's last 4,000 characters, seconds); `stdout_last` keeps the end of
    stdout (pytest's summary) when stderr is noisy."""
    t = time.time()
    try:
        p = subprocess.run(
            cmd,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
        both = p.stderr + p.stdout if stdout_last else p.stdout + p.stderr
        return p.returncode, both[-4000:], time.time() - t
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f} s", time.time() - t


# ---------------------------------------------------------------- 1. precisions
def _sdpa_backend(model, batch, autocast) -> str | None:
    import torch
    from torch.profiler import profile

    if model.__class__.__name__ != "Transformer":
        return None
    with torch.no_grad(), autocast, profile() as prof:
        model.eval()(batch.src, batch.src_mask, batch.tgt_in)
    names = {e.name for e in prof.events()}
    for key, name in (
        ("flash", "flash"),
        ("efficient", "mem_efficient"),
        ("cudnn", "cudnn"),
        ("math", "math"),
    ):
        if any("scaled_dot_product" in n and key in n for n in names):
            return name
    return "math" if any("scaled_dot_product" in n for n in names) else "none"


def precision_run(config: str, sets: list[str], precision: str, steps: int) -> dict:
    import tempfile

    import torch

    from nmt.config.load import load_config
    from nmt.data.prepared import prepared_corpus
    from nmt.models import build_model
    from nmt.training.distributed import DistInfo
    from nmt.training.trainer import Trainer, resolve_device

    cfg = load_config(
        config,
        [*sets, f"train.precision={precision}", "train.progress=false", "train.clip_grad=1.0"],
    )
    device = resolve_device(cfg.train)
    corpus = prepared_corpus(cfg)
    tok = corpus.tokenizer
    batcher = corpus.batcher(cfg.data, seed=cfg.train.seed)
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    trainer = Trainer(
        cfg, model, tok, batcher, [], Path(tempfile.mkdtemp()), DistInfo(device=device)
    )
    enc_norms: list[float] = []
    real_step = trainer.opt.step

    def step_and_measure():  # the encoder's gradient norm as the optimiser gets it
        grads = [p.grad for p in model.encoder.parameters() if p.grad is not None]
        enc_norms.append(
            float(
                torch.linalg.vector_norm(
                    torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])
                )
            )
        )
        real_step()

    trainer.opt.step = step_and_measure
    rnn_dtypes: set[str] = set()
    if isinstance(model.encoder, torch.nn.RNNBase):

        def record(_m, _i, out):
            o = out[0]
            rnn_dtypes.add(str((o.data if hasattr(o, "data") else o).dtype).replace("torch.", ""))

        model.encoder.register_forward_hook(record)
    order = batcher.epoch(0)
    losses, skipped = [], 0
    for i in range(steps):
        out = trainer.train_step([batcher.batch(order[i % len(order)])])
        if out is None or "loss" not in out:
            skipped += 1
            losses.append(None)
            continue
        trainer.p.step += 1
        losses.append(out["loss"])
    backend = _sdpa_backend(model, batcher.batch(order[0]).to(device), trainer.autocast)
    return {
        "arch": cfg.model.arch,
        "precision": trainer.precision,
        "device": str(device),
        "losses": losses,
        "skipped_steps": skipped,
        "grad_scale": trainer.scaler.get_scale() if trainer.scaler.is_enabled() else None,
        "encoder_grad_norms": enc_norms,
        "rnn_dtype": sorted(rnn_dtypes) or None,
        "sdpa_backend": backend,
    }


def _tail_loss(losses: list) -> float:
    real = [x for x in losses if x is not None]
    return statistics.mean(real[-5:]) if real else float("nan")


def check_precisions(cpu: bool, steps: int) -> dict:
    import math

    import torch

    precisions = ["fp32", "bf16"] + ([] if cpu or not torch.cuda.is_available() else ["fp16"])
    out: dict = {"steps": steps, "runs": [], "ok": True}
    for arch, (config, sets) in configs(cpu).items():
        ref = None
        for p in precisions:
            t = time.time()
            r = precision_run(config, sets + (["train.device=cpu"] if cpu else []), p, steps)
            r["seconds"] = time.time() - t
            r["final_loss"] = _tail_loss(r["losses"])
            finite = math.isfinite(r["final_loss"])
            out["ok"] &= finite
            if p == "fp32":
                ref = r
            else:
                r["loss_vs_fp32"] = r["final_loss"] / ref["final_loss"] - 1
                r["within_2pct"] = abs(r["loss_vs_fp32"]) <= 0.02
                pairs = list(zip(r["encoder_grad_norms"], ref["encoder_grad_norms"]))
                r["encoder_grad_norm_ratio"] = statistics.median(a / b for a, b in pairs if b)
            out["runs"].append(r)
            print(
                f"  {arch} {p}: loss {r['final_loss']:.4f} ({r['seconds']:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    return out


# ---------------------------------------------------------------- 2. torchrun
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_worker(out_dir: str) -> int:
    """Under torchrun: train with a NaN on the last rank's 3rd forward pass, then compare the
    parameters of all ranks; rank 0 writes ddp.json."""
    import torch
    import torch.distributed as dist

    import nmt.training.trainer as train_mod
    from nmt.cli import main

    last = (
        os.environ.get("RANK", "0") == str(int(os.environ.get("WORLD_SIZE", "1")) - 1)
        and os.environ.get("NMT_CHECK_NAN") == "1"
    )
    real_loss, calls = train_mod.loss_fn, {"n": 0}

    def loss_fn(*args):
        calls["n"] += 1
        loss = real_loss(*args)
        return loss * float("nan") if last and calls["n"] == 3 else loss

    train_mod.loss_fn = loss_fn
    real_train = train_mod.Trainer.train

    def train_and_compare(self):
        progress = real_train(self)
        flat = torch.cat([p.detach().float().flatten() for p in self.model.parameters()])
        sums = [None] * self.dist.world
        if self.dist.world > 1:
            dist.all_gather_object(sums, [float(flat.sum()), float(flat.abs().sum())])
        else:
            sums = [[float(flat.sum()), float(flat.abs().sum())]]
        if self.dist.rank == 0:
            Path(out_dir, "ddp.json").write_text(
                json.dumps(
                    {
                        "world": self.dist.world,
                        "device": str(self.device),
                        "step": self.p.step,
                        "param_sums": sums,
                        "identical": all(s == sums[0] for s in sums),
                        "skipped_nan": self.p.bad_steps_total,
                    }
                )
            )
        return progress

    train_mod.Trainer.train = train_and_compare
    return main(sys.argv[sys.argv.index("--ddp-worker") + 2 :])


def check_ddp(cpu: bool, tmp: Path) -> dict:
    import torch

    config, sets = configs(cpu)["transformer"]
    nproc = 2 if cpu else max(1, min(2, torch.cuda.device_count()))
    run_dir = tmp / "ddp-run"
    sets = [
        *sets,
        f"train.run_dir={run_dir}",
        "train.max_steps=8",
        "train.valid_every=1000",
        "train.log_every=1",
        "train.max_minutes=0",
        "train.valid_max_sentences=20",
        "train.device=" + ("cpu" if cpu else "cuda"),
    ]
    flags = [x for s in sets for x in ("--set", s)]
    env = {"OMP_NUM_THREADS": "1", "NMT_CHECK_NAN": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        f"--master_port={_free_port()}",
        str(Path(__file__)),
        "--ddp-worker",
        str(tmp),
        "train",
        config,
        *flags,
        "--overwrite",
    ]
    rc, tail, sec = run(cmd, timeout=300, env=env)
    out = {"nproc": nproc, "backend": "gloo" if cpu else "nccl", "seconds": sec, "rc": rc}
    if rc != 0:
        return {**out, "ok": False, "error": tail}
    out.update(json.loads((tmp / "ddp.json").read_text()))
    log = (run_dir / "train.log").read_text()
    out["nan_skipped_on_all_ranks"] = "non-finite loss at step 3: step skipped" in log
    rc, tail, sec = run(
        cmd[:-1] + ["--set", "train.max_steps=10", "--resume"],
        timeout=300,
        env={**env, "NMT_CHECK_NAN": "0"},
    )
    out["resume"] = {"rc": rc, "seconds": sec}
    if rc == 0:
        out["resume"].update(json.loads((tmp / "ddp.json").read_text()))
    out["ok"] = (
        out["identical"]
        and out["nan_skipped_on_all_ranks"]
        and rc == 0
        and out["resume"].get("step") == 10
        and out["resume"].get("identical", False)
    )
    return out


# ---------------------------------------------------------------- 3. benchmark
def check_benchmark(cpu: bool, tmp: Path, compiled: bool = False, shapes: int = 0) -> dict:
    """The training benchmark of the Transformer (transformer-base on a GPU) and, eager only,
    its translation; `compiled`: the same step under `train.compile: true` (training only);
    `shapes`: its batches in that many fixed shapes, compiled static (CUDA graphs on a GPU)."""
    config, sets = configs(cpu)["transformer"]
    if cpu:
        sets = [*sets, "train.device=cpu"]
        args = [
            "--precisions",
            "fp32",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--repeats",
            "1",
            "--sentences",
            "20",
            "--threads",
            "1",
        ]
    else:
        sets = [*sets, *BASE]
        args = [
            "--precisions",
            "bf16",
            "--steps",
            "20",
            "--warmup",
            "5",
            "--repeats",
            "2",
            "--sentences",
            "1000",
        ]
    run_dir = tmp / "bench-run"
    sets = [*sets, f"train.compile={'true' if compiled else 'false'}", f"data.shapes={shapes}"]
    out = tmp / f"bench-{'compiled' if compiled else 'eager'}-{shapes}.json"
    cmd = [
        sys.executable,
        "benchmarks/benchmark.py",
        "--configs",
        config,
        *args,
        *[x for s in sets for x in ("--set", s)],
        *(
            []
            if compiled
            else ["--save-run", str(run_dir), "--translate", str(run_dir / "best.pt")]
        ),
        "--out",
        str(out),
    ]
    rc, tail, sec = run(cmd, timeout=420)
    if rc != 0:
        return {"ok": False, "rc": rc, "error": tail, "seconds": sec}
    bench = json.loads(out.read_text())
    tr = bench["training"][0]
    result = {
        "ok": True,
        "seconds": sec,
        "config": config,
        "sets": sets,
        "tgt_tok_s": tr["tgt_tok_s"],
        "mfu": tr["mfu"],
        "precision": tr["precision_used"],
        "peak_matmul_tflops": tr["peak_matmul_tflops"],
        "host_syncs_per_step": tr["host_syncs_per_step"],
        "peak_mem_mb": tr["peak_mem_mb"],
        "warmup_s": tr["warmup_s"],  # compiled: the compilation happens here
        "machine": bench["machine"],
    }
    if not compiled:
        tl = bench["translation"][0]
        result["translate_greedy_sent_s"] = tl["greedy"]["sent_s"]
        result["translate_beam5_sent_s"] = tl["beam5"]["sent_s"]
    return result


# ---------------------------------------------------------------- 4. pytest (run last)
def check_pytest(cpu: bool, workers: int) -> dict:
    """The suite with CUDA visible (so `device: auto` trains on the GPU); every failure named."""
    args = (
        ["tests/test_precision.py", "-k", "auto_picks or one_line_error or tf32_switch"]
        if cpu
        else ["-rf"]
    )
    import importlib.util

    # pytest-xdist where installed: a lease is minutes long, and the suite is CPU-bound
    if workers > 1 and importlib.util.find_spec("xdist"):
        args += ["-n", str(workers)]
    rc, tail, sec = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        timeout=300,
        stdout_last=True,
    )
    lines = tail.strip().splitlines()
    failed = [x for x in lines if x.startswith(("FAILED", "ERROR"))]
    return {"ok": rc == 0, "args": args, "seconds": sec, "summary": lines[-1:], "failed": failed}


# ---------------------------------------------------------------- report
def targets(result: dict, cpu: bool) -> dict:
    b, runs = result.get("benchmark", {}), result.get("precisions", {}).get("runs", [])
    out = {
        "host_syncs_per_step_le_1": b.get("host_syncs_per_step", 99) <= 1,
        "low_precision_loss_within_2pct_of_fp32": all(r.get("within_2pct", True) for r in runs),
    }
    if not cpu:
        # the better of the eager and the compiled step (train.compile: auto follows the winner)
        mfu = max(b.get("mfu", 0), *(result.get(k, {}).get("mfu", 0) for k in COMPILED))
        out["transformer_base_bf16_mfu_ge_30pct"] = mfu >= 0.30
        out["transformer_base_bf16_mfu_ge_40pct_stretch"] = mfu >= 0.40
    return out


def table(result: dict) -> str:
    lines = ["| check | result |", "|---|---|"]
    for k in ("precisions", "ddp", "benchmark", *COMPILED, "pytest"):
        r = result.get(k, {})
        lines.append(f"| {k} | {'ok' if r.get('ok') else 'FAILED'} ({r.get('seconds', 0):.0f} s) |")
    lines += [
        "",
        "| arch | precision | final loss | vs fp32 | enc. grad norm / fp32 | skipped | "
        "scale | RNN dtype | SDPA |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in result.get("precisions", {}).get("runs", []):
        vs = f"{100 * r['loss_vs_fp32']:+.2f}%" if "loss_vs_fp32" in r else "-"
        ratio = f"{r['encoder_grad_norm_ratio']:.3f}" if "encoder_grad_norm_ratio" in r else "-"
        lines.append(
            f"| {r['arch']} | {r['precision']} | {r['final_loss']:.4f} | {vs} | {ratio} | "
            f"{r['skipped_steps']} | {r['grad_scale'] or '-'} | "
            f"{','.join(r['rnn_dtype'] or ['-'])} | {r['sdpa_backend'] or '-'} |"
        )
    b = result.get("benchmark", {})
    if b.get("ok"):
        lines += [
            "",
            f"benchmark ({b['precision']}): {b['tgt_tok_s']:.0f} target tok/s, MFU "
            f"{100 * b['mfu']:.1f}% of {b['peak_matmul_tflops']:.3g} TFLOP/s, "
            f"{b['host_syncs_per_step']:.2f} host syncs/step, translation "
            f"{b['translate_greedy_sent_s']:.1f} sent/s greedy, "
            f"{b['translate_beam5_sent_s']:.1f} beam 5",
        ]
    for k, how in COMPILED.items():
        c = result.get(k, {})
        if c.get("ok"):
            lines.append(
                f"{k} ({c['precision']}, {how}): {c['tgt_tok_s']:.0f} target tok/s, MFU "
                f"{100 * c['mfu']:.1f}%, {c['host_syncs_per_step']:.2f} host syncs/step, "
                f"{c['warmup_s']:.0f} s of warm-up steps (compiling)"
            )
    lines += [
        "",
        "targets: "
        + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in result["targets"].items()),
    ]
    return "\n".join(lines)


def _finite(x):
    """Strict JSON: NaN and infinities become null."""
    if isinstance(x, float):
        return x if x == x and abs(x) != float("inf") else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n")
    tmp.replace(path)


def main() -> int:
    if "--ddp-worker" in sys.argv:
        return ddp_worker(sys.argv[sys.argv.index("--ddp-worker") + 1])
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cpu", action="store_true", help="no GPU: small configs, fp16 skipped")
    ap.add_argument(
        "--out",
        help="JSON file (default: benchmarks/benchmark-<gpu>.json, or gpu_check_cpu.json with --cpu)",
    )
    ap.add_argument(
        "--steps",
        type=int,
        default=None,
        help="steps per architecture and precision (default 50; 4 with --cpu)",
    )
    ap.add_argument(
        "--pytest-workers",
        type=int,
        default=0,
        help="run the suite in N pytest-xdist processes (default: one process)",
    )
    ap.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=["pytest", "precisions", "ddp", "benchmark", *COMPILED],
    )
    a = ap.parse_args()
    import tempfile

    import torch

    if not a.cpu and not torch.cuda.is_available():
        print(
            "gpu_check: no CUDA device is visible; run with --cpu for the CPU mode", file=sys.stderr
        )
        return 2
    gpu = torch.cuda.get_device_name() if not a.cpu else None
    name = "cpu" if a.cpu else gpu.lower().replace("nvidia ", "").split()[0]
    out_path = Path(
        a.out or ("gpu_check_cpu.json" if a.cpu else f"benchmarks/benchmark-{name}.json")
    )
    steps = a.steps or (4 if a.cpu else 50)
    tmp = Path(tempfile.mkdtemp(prefix="nmt-gpu-check-"))
    result: dict = {
        "mode": "cpu" if a.cpu else "gpu",
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "command": " ".join(sys.argv),
    }
    t0 = time.time()
    # The measurements first: a slow or failing suite must not eat a short lease's benchmark.
    phases = {
        "precisions": lambda: check_precisions(a.cpu, steps),
        "ddp": lambda: check_ddp(a.cpu, tmp),
        "benchmark": lambda: check_benchmark(a.cpu, tmp),
        "compiled": lambda: check_benchmark(a.cpu, tmp, compiled=True),
        "static": lambda: check_benchmark(a.cpu, tmp, True, STATIC_SHAPES[a.cpu]),
        "pytest": lambda: check_pytest(a.cpu, a.pytest_workers),
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    result["targets"] = targets(result, a.cpu)
    for key, fn in phases.items():
        if key in a.skip:
            continue
        print(f"gpu_check: {key} ...", file=sys.stderr, flush=True)
        t = time.time()
        try:
            result[key] = fn()
        except Exception as e:  # a phase that crashes is a finding: record it, go on
            result[key] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        result[key].setdefault("seconds", time.time() - t)
        result["seconds"] = time.time() - t0
        result["targets"] = targets(result, a.cpu)
        # written after every phase: a lease that ends mid-check keeps what was measured
        _write_atomic(out_path, json.dumps(_finite(result), indent=2, allow_nan=False, default=str))
    print(table(result))
    print(f"\nwrote {out_path} ({result['seconds']:.0f} s)")
    return 0 if all(result[k].get("ok") for k in phases if k in result) else 1


if __name__ == "__main__":
    raise SystemExit(main())
