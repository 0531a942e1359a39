"""nmt vs CTranslate2 on CPU: sentences/s, BLEU and identical lines, fp32 and int8, greedy and beam.

For each run given, the same weights are decoded by four engines on the same sentences, with the
same per-sentence output limit (decode.max_len_a/b; CTranslate2 through translate_ct2, which groups
sentences by that limit): nmt fp32, CTranslate2 fp32, nmt --int8, CTranslate2 int8. The engines
take turns within each repetition, so a load change on this shared machine hits them alike;
the JSON keeps every repetition's time and the CPU model, flags, load (`uptime`) and torch's
quantized engine. --bf16 adds a fifth engine, nmt with the model's weights cast to bfloat16
(fast on CPUs with AVX512-BF16 or AMX; log-probs and search stay fp32).

    python scripts/benchmark_export.py RUN [RUN ...] --n 1000 --threads 2 --reps 2 \
        --out docs/benchmark-export-2core-cpu.json [--profile] [--bf16]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sacrebleu
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nmt.checkpoint import load_model  # noqa: E402
from nmt.data.corpus import load_split  # noqa: E402
from nmt.export.ctranslate2 import export_ctranslate2, import_ctranslate2, translate_ct2  # noqa: E402
from nmt.models.quantize import quantize_int8  # noqa: E402
from nmt.translate import translate_texts  # noqa: E402


def machine() -> dict:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    info = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
    flags = info.get("Flags", "").split()
    return {
        "cpu": info.get("Model name", "").strip(),
        "cores": os.cpu_count(),
        "simd_flags": sorted(
            f for f in flags if f.startswith(("avx", "fma", "amx", "f16c")) or "vnni" in f
        ),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "quantized_engine": torch.backends.quantized.engine,
        "ctranslate2": import_ctranslate2().__version__,
    }


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def engines(run: str, tmp: Path, threads: int, bf16: bool = False) -> tuple:
    """(config, model, tokenizer, meta, {name: translate(texts, beam)}) for the four engines
    (five with bf16), all from the run's best weights."""
    ct2 = import_ctranslate2()
    cfg, model, tok, meta = load_model(run)
    q = quantize_int8(model)
    out = {
        "nmt fp32": lambda s, k: [
            t.text for t in translate_texts(model, tok, s, cfg.decode, beam=k)
        ],
        "nmt int8": lambda s, k: [t.text for t in translate_texts(q, tok, s, cfg.decode, beam=k)],
    }
    for kind, quant in (("fp32", None), ("int8", "int8")):
        path = export_ctranslate2(run, tmp / f"ct2-{kind}", quantization=quant)
        tr = ct2.Translator(
            str(path),
            device="cpu",
            inter_threads=1,
            intra_threads=threads,
            compute_type="int8" if quant else "float32",
        )
        out[f"ct2 {kind}"] = (lambda t: lambda s, k: translate_ct2(t, tok, s, cfg.decode, beam=k))(
            tr
        )
    order = ["nmt fp32", "ct2 fp32", "nmt int8", "ct2 int8"]
    if bf16:
        b = copy.deepcopy(model).to(torch.bfloat16)
        out["nmt bf16"] = lambda s, k: [
            t.text for t in translate_texts(b, tok, s, cfg.decode, beam=k)
        ]
        order.append("nmt bf16")
    return cfg, model, tok, meta, {k: out[k] for k in order}


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


def bench_run(
    run: str,
    n: int,
    threads: int,
    reps: int,
    beams: list[int],
    prof: bool,
    save,
    bf16: bool = False,
) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cfg, model, tok, meta, eng = engines(run, Path(tmp), threads, bf16)
        src, ref = load_split(cfg.data, cfg.eval.split)
        src, ref = src[:n], ref[:n]
        m = cfg.model
        res = {
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
            "sentences": len(src),
            "decode": {
                "max_len_a": cfg.decode.max_len_a,
                "max_len_b": cfg.decode.max_len_b,
                "alpha": cfg.decode.alpha,
            },
            "beams": {},
        }
        for beam in beams:
            for name, f in eng.items():  # warm-up: allocations, first-call kernels
                f(src[:16], beam)
            times: dict[str, list[float]] = {k: [] for k in eng}
            hyps: dict[str, list[str]] = {}
            for _ in range(reps):
                for name, f in eng.items():
                    t = time.perf_counter()
                    hyps[name] = f(src, beam)
                    times[name].append(time.perf_counter() - t)
                    print(
                        f"  beam {beam} {name}: {times[name][-1]:.1f} s, load {load()}",
                        file=sys.stderr,
                        flush=True,
                    )
            peer = {
                "nmt fp32": "nmt fp32",
                "ct2 fp32": "nmt fp32",
                "nmt int8": "nmt fp32",
                "ct2 int8": "ct2 fp32",
                "nmt bf16": "nmt fp32",
            }
            row = {}
            for name in eng:
                best = min(times[name])
                same = sum(a == b for a, b in zip(hyps[name], hyps[peer[name]])) / len(src)
                row[name] = {
                    "sent_s": round(len(src) / best, 2),
                    "seconds": [round(x, 2) for x in times[name]],
                    "bleu": round(sacrebleu.corpus_bleu(hyps[name], [ref]).score, 2),
                    "identical_to": peer[name],
                    "identical": round(same, 4),
                }
            s = {k: v["sent_s"] for k, v in row.items()}
            row["ratios"] = {
                "nmt_fp32/ct2_fp32": round(s["nmt fp32"] / s["ct2 fp32"], 3),
                "nmt_int8/nmt_fp32": round(s["nmt int8"] / s["nmt fp32"], 3),
                "ct2_int8/ct2_fp32": round(s["ct2 int8"] / s["ct2 fp32"], 3),
                "nmt_int8/ct2_int8": round(s["nmt int8"] / s["ct2 int8"], 3),
            }
            if "nmt bf16" in s:
                row["ratios"]["nmt_bf16/nmt_fp32"] = round(s["nmt bf16"] / s["nmt fp32"], 3)
                row["ratios"]["nmt_bf16/ct2_fp32"] = round(s["nmt bf16"] / s["ct2 fp32"], 3)
            if prof:
                row["nmt_fp32_profile"] = profile_nmt(model, tok, cfg, src[:100], beam)
            res["beams"][str(beam)] = row
            save(res)  # a partial result survives an interrupted benchmark
            print(json.dumps({str(beam): row["ratios"]}), file=sys.stderr, flush=True)
        return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="run directories (transformers)")
    ap.add_argument("--n", type=int, default=1000, help="test sentences per run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=1, help="timed repetitions (best is reported)")
    ap.add_argument("--beams", default="1,5")
    ap.add_argument("--profile", action="store_true", help="profile nmt fp32 on 100 sentences")
    ap.add_argument("--bf16", action="store_true", help="add nmt with bfloat16 weights")
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
        Path(a.out).write_text(
            json.dumps(
                {**out, "runs": runs, "load_after": load(), "uptime_after": uptime()}, indent=2
            )
            + "\n",
            encoding="utf-8",
        )

    for run in a.runs:
        out["runs"].append(
            bench_run(
                run,
                a.n,
                a.threads,
                a.reps,
                [int(b) for b in a.beams.split(",")],
                a.profile,
                save,
                a.bf16,
            )
        )
    out["load_after"], out["uptime_after"] = load(), uptime()
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
