"""nmt vs CTranslate2 on CPU: sentences/s, BLEU and identical lines, fp32 and int8, greedy and beam.

For each run given, the same weights are decoded by six engines on the same sentences, with the
same output limit per sentence: nmt fp32 (as `nmt translate` runs it on this CPU: oneDNN linears,
or oneMKL's on Intel), nmt fp32 with oneDNN linears and with torch's stock (oneMKL) linears,
CTranslate2 fp32, nmt --int8, CTranslate2 int8. Every timed
pass runs in a fresh process of its own (`worker`: two OpenMP pools in one process slowed each
other), the engines take turns within each repetition, so a load change on this shared machine
hits them alike, and the best repetition counts; the JSON keeps every repetition's time and the
CPU model, flags, load (`uptime`) and torch's quantized engine. --bf16 adds nmt with the model's weights cast to bfloat16 (fast on CPUs with
AVX512-BF16 or AMX; log-probs and search stay fp32).

The output limit: CTranslate2 takes one `max_decoding_length` per call, so our per-sentence
limit a * src_len + b (`--limit per-sentence`) makes translate_ct2 call it once per distinct
limit, in small batches. `--limit fixed` (the default) gives every sentence the largest of those
limits (max_len_a 0) in both engines: CTranslate2 then sorts and batches all sentences in one
call, as nmt does, and no sentence's limit is lower than its own per-sentence one. With a
trained model few outputs come near it; the JSON counts those that reach it.

    python benchmarks/benchmark_export.py RUN [RUN ...] --n 1000 --threads 2 --reps 3 \
        --out benchmarks/benchmark-export-2core-cpu.json [--profile] [--bf16] [--limit per-sentence]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import sacrebleu
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import cpu_model, simd_flags, uptime, write_json  # noqa: E402
from benchmarks.machine import load_avg as load  # noqa: E402
from nmt.checkpoint import load_model  # noqa: E402
from nmt.config import DecodeConfig  # noqa: E402
from nmt.data.corpus import load_split  # noqa: E402
from nmt.export.ctranslate2 import (  # noqa: E402
    export_ctranslate2,
    import_ctranslate2,
    output_limit,
    translate_ct2,
)
from nmt.models.onednn import for_cpu_decoding, use_onednn_linears  # noqa: E402
from nmt.models.quantize import quantize_int8  # noqa: E402
from nmt.text_translation import encode_inputs, translate_texts  # noqa: E402


def machine() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "simd_flags": simd_flags(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "quantized_engine": torch.backends.quantized.engine,
        "ctranslate2": import_ctranslate2().__version__,
    }


ENGINES = ["nmt fp32", "nmt fp32 onednn", "nmt fp32 mkl", "ct2 fp32", "nmt int8", "ct2 int8"]


def engine(name: str, run: str, ct2_dir: Path, threads: int):
    """translate(texts, beam, decode_cfg) -> texts for one engine, from the run's best weights:
    nmt fp32 is what `nmt translate` runs on this CPU (`for_cpu_decoding`), nmt fp32 onednn and
    nmt fp32 mkl the two linear kernels it chooses between, nmt bf16 the weights cast to bfloat16."""
    if name.startswith("ct2"):
        kind = name.split()[1]
        tok = load_model(run)[2]
        tr = import_ctranslate2().Translator(
            str(ct2_dir / kind),
            device="cpu",
            inter_threads=1,
            intra_threads=threads,
            compute_type="int8" if kind == "int8" else "float32",
        )
        return lambda s, k, dec: translate_ct2(tr, tok, s, dec, beam=k)
    _, model, tok, _ = load_model(run)
    model = {
        "nmt fp32": lambda m: for_cpu_decoding(m, "cpu", "fp32"),
        "nmt fp32 onednn": use_onednn_linears,
        "nmt fp32 mkl": lambda m: m,
        "nmt int8": quantize_int8,
        "nmt bf16": lambda m: m.to(torch.bfloat16),
    }[name](model)
    return lambda s, k, dec: [t.text for t in translate_texts(model, tok, s, dec, beam=k)]


def worker(spec: dict) -> dict:
    """One engine in its own process: warm up, then time one pass over the sentences.

    Each engine gets a fresh process because torch and CTranslate2 each bring an OpenMP thread
    pool: in one process, whichever ran last kept its threads spinning on the two cores, and
    nmt ran 1.7x slower right after a CTranslate2 call than before it."""
    torch.set_num_threads(spec["threads"])
    f = engine(spec["engine"], spec["run"], Path(spec["ct2_dir"]), spec["threads"])
    dec = DecodeConfig(**spec["decode"])
    f(spec["src"][:16], spec["beam"], dec)  # allocations, first-call kernels
    t = time.perf_counter()
    hyps = f(spec["src"], spec["beam"], dec)
    return {"seconds": time.perf_counter() - t, "hyps": hyps}


def run_worker(spec: dict) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def profile_nmt(model, tok, cfg, src: list[str], beam: int) -> list[dict]:
    """Where nmt's decoding time goes: the top operators by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        translate_texts(model, tok, src, cfg.decode, beam=beam)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events) or 1
    return [
        {
            "op": e.key,
            "self_ms": round(e.self_cpu_time_total / 1e3, 1),
            "share": round(e.self_cpu_time_total / total, 3),
            "calls": e.count,
        }
        for e in events[:15]
    ]


PEER = {  # what each engine's lines are compared with
    "nmt fp32": "nmt fp32",
    "nmt fp32 onednn": "nmt fp32",
    "nmt fp32 mkl": "nmt fp32",
    "ct2 fp32": "nmt fp32",
    "nmt int8": "nmt fp32",
    "ct2 int8": "ct2 fp32",
    "nmt bf16": "nmt fp32",
}
RATIOS = [  # (numerator, denominator) of the reported speed ratios
    ("nmt fp32", "ct2 fp32"),
    ("nmt fp32 mkl", "ct2 fp32"),
    ("nmt fp32 onednn", "nmt fp32 mkl"),
    ("nmt int8", "nmt fp32"),
    ("ct2 int8", "ct2 fp32"),
    ("nmt int8", "ct2 int8"),
    ("nmt bf16", "nmt fp32"),
    ("nmt bf16", "ct2 fp32"),
]


def describe(run: str, cfg, model, tok, meta, n: int, limit: str, largest: int) -> dict:
    m = cfg.model
    return {
        "run": run,
        "checkpoint": meta["path"],
        "train_steps": meta["step"],
        "model": {
            "d_model": m.d_model,
            "layers": m.layers,
            "heads": m.heads,
            "ff": m.ff,
            "norm": m.norm,
            "params": model.num_parameters(),
            "vocab": tok.tgt_vocab_size,
        },
        "split": f"{cfg.eval.split} ({cfg.data.splits.get(cfg.eval.split)})",
        "sentences": n,
        "limit": limit if limit == "per-sentence" else f"fixed: {largest} tokens",
        "decode": dataclasses.asdict(cfg.decode),
        "beams": {},
    }


def summarize(times: dict, hyps: dict, ref: list[str], tok, largest: Optional[int]) -> dict:
    row = {}
    for name in times:
        same = sum(a == b for a, b in zip(hyps[name], hyps[PEER[name]])) / len(ref)
        row[name] = {
            "sent_s": round(len(ref) / min(times[name]), 2),
            "seconds": [round(x, 3) for x in times[name]],
            "bleu": round(sacrebleu.corpus_bleu(hyps[name], [ref]).score, 2),
            "identical_to": PEER[name],
            "identical": round(same, 4),
        }
        if largest is not None:  # outputs as long as the fixed limit (re-encoded pieces)
            row[name]["at_limit"] = sum(len(x) >= largest for x in tok.encode_tgt(hyps[name]))
    s = {k: v["sent_s"] for k, v in row.items()}
    row["ratios"] = {
        f"{a}/{b}".replace(" ", "_"): round(s[a] / s[b], 3) for a, b in RATIOS if a in s and b in s
    }
    return row


def bench_run(run: str, a: argparse.Namespace, save) -> dict:
    cfg, model, tok, meta = load_model(run)
    src, ref = load_split(cfg.data, cfg.eval.split)
    src, ref = src[: a.n], ref[: a.n]
    lengths = [len(x) for x in encode_inputs(tok, src, cfg.decode.max_input_tokens)]
    largest = max(output_limit(x, cfg.decode) for x in lengths)
    if a.limit == "fixed":
        cfg.decode = dataclasses.replace(cfg.decode, max_len_a=0.0, max_len_b=largest)
    res = describe(run, cfg, model, tok, meta, len(src), a.limit, largest)
    names = ENGINES + (["nmt bf16"] if a.bf16 else [])
    with tempfile.TemporaryDirectory() as tmp:
        for kind, quant in (("fp32", None), ("int8", "int8")):
            export_ctranslate2(run, Path(tmp) / kind, quantization=quant)
        for beam in [int(b) for b in a.beams.split(",")]:
            times: dict[str, list[float]] = {k: [] for k in names}
            hyps: dict[str, list[str]] = {}
            for _ in range(a.reps):  # engines take turns: a load change hits them alike
                for name in names:
                    spec = dict(engine=name, run=run, ct2_dir=tmp, threads=a.threads, beam=beam)
                    got = run_worker({**spec, "src": src, "decode": dataclasses.asdict(cfg.decode)})
                    times[name].append(got["seconds"])
                    hyps[name] = got["hyps"]
                    print(
                        f"  beam {beam} {name}: {got['seconds']:.2f} s, load {load()}",
                        file=sys.stderr,
                        flush=True,
                    )
            row = summarize(times, hyps, ref, tok, largest if a.limit == "fixed" else None)
            if a.profile:
                fast = for_cpu_decoding(copy.deepcopy(model), "cpu", "fp32")
                row["nmt_fp32_profile"] = profile_nmt(fast, tok, cfg, src[:100], beam)
                row["nmt_int8_profile"] = profile_nmt(
                    quantize_int8(model), tok, cfg, src[:100], beam
                )
            res["beams"][str(beam)] = row
            save(res)  # a partial result survives an interrupted benchmark
            print(json.dumps({str(beam): row["ratios"]}), file=sys.stderr, flush=True)
    return res


def main() -> None:
    if sys.argv[1:] == ["--worker"]:
        print(json.dumps(worker(json.loads(sys.stdin.read()))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="run directories (transformers)")
    ap.add_argument("--n", type=int, default=1000, help="test sentences per run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions (best is reported)")
    ap.add_argument("--beams", default="1,5")
    ap.add_argument(
        "--profile", action="store_true", help="profile nmt fp32 and int8 on 100 sentences"
    )
    ap.add_argument("--bf16", action="store_true", help="add nmt with bfloat16 weights")
    ap.add_argument(
        "--limit",
        choices=["fixed", "per-sentence"],
        default="fixed",
        help="output limit: the largest per-sentence limit for all (default), or each its own",
    )
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = {
        "command": "python " + " ".join(sys.argv),
        "threads": a.threads,
        "machine": machine(),
        "load_before": load(),
        "uptime_before": uptime(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": [],
    }

    def save(partial: dict) -> None:
        runs = out["runs"] + [partial]
        write_json(a.out, {**out, "runs": runs, "load_after": load(), "uptime_after": uptime()})

    for run in a.runs:
        out["runs"].append(bench_run(run, a, save))
    out["load_after"], out["uptime_after"] = load(), uptime()
    print(write_json(a.out, out))


if __name__ == "__main__":
    main()
