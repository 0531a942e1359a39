#!/usr/bin/env python
"""The one speed benchmark: training, the JoeyNMT peer and translation against CTranslate2, in
one run, one JSON and one table.

    python benchmarks/speed.py --run RUN --src ../shared/data/multi30k/train.de --n 5000 \
        --reps 3 --joeynmt /path/to/joeynmt-venv/bin/python --out speed.json

Parts (each in its own processes, one after another, so none slows another):
1. training: `benchmark.py` on the three Multi30k recipes, fp32 and bf16: target tokens/s and
   model FLOP utilisation against the same run's matmul peaks (median of --reps);
2. the JoeyNMT peer (`joeynmt_peer.py`, with --joeynmt): its training tokens/s on the same data,
   sizes and batches, Transformer and RNNsearch;
3. translation (`benchmark_process.py`, with --run): `nmt translate` against a CTranslate2 client
   on the same exported weights, whole processes, greedy and beam 5, fp32 and int8 (median of
   --reps);
4. the quick study (with --quick-study): `nmt study configs/study/quick.yaml` timed once, as a
   process.
Close everything else first: on two cores a second busy process halves every figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import benchmark_process, joeynmt_peer  # noqa: E402
from benchmarks.machine import machine, uptime, write_json  # noqa: E402
from nmt.config.load import load_config  # noqa: E402

RECIPES = [
    f"configs/multi30k/de-en/{a}_local.yaml" for a in ("transformer", "rnnsearch", "seq2seq")
]
QUICK_STUDY = "configs/study/quick.yaml"


def training(configs: list[str], reps: int, steps: int, out: Path) -> list[dict]:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "benchmark.py"), "--configs", *configs]
    cmd += ["--precisions", "fp32", "bf16", "--steps", str(steps), "--warmup", "3"]
    cmd += ["--repeats", str(reps), "--out", str(out)]
    if subprocess.run(cmd, cwd=ROOT).returncode:
        raise SystemExit("error: the training benchmark failed (its output is above)")
    return json.loads(out.read_text("utf-8"))["training"]


def quick_study(out: Path, study: str = QUICK_STUDY) -> dict:
    cmd = [sys.executable, "-m", "nmt", "study", study, "--out", str(out)]
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = round(time.perf_counter() - t, 1)
    if done.returncode:
        raise SystemExit(f"error: the quick study failed:\n{done.stderr[-2000:]}")
    # what each model learned, so a faster study can be checked against the README's lesson
    models = {
        name: {
            "train_seconds": round(r["train_seconds"], 1),
            "steps": r["steps"],
            "bleu": round(r["bleu"], 2),
            "bleu_by_length": {
                f"{b['lo']}-{b['hi'] or ''}": b["bleu"] and round(b["bleu"], 2)  # None: empty
                for b in r["buckets"]
            },
        }
        for name, r in json.loads((out / "study.json").read_text()).items()
    }
    return {"command": f"nmt study {study}", "seconds": seconds, "models": models}


def _by_config(result: dict) -> dict[str, dict[str, dict]]:
    """Training rows by config file name, then by the precision asked for."""
    by: dict[str, dict[str, dict]] = {}
    for r in result.get("training", []):
        by.setdefault(Path(r["config"]).stem, {})[r["precision"]] = r
    return by


def _training_rows(result: dict) -> list[str]:
    rows = []
    for name, p in _by_config(result).items():
        for prec, r in p.items():
            used = "" if r["precision_used"] == prec else f" (ran {r['precision_used']})"
            rows.append(f"| {name} training {prec}{used}, target tok/s | {r['tgt_tok_s']:,.0f} |")
            rows.append(f"| {name} training {prec}{used}, MFU | {100 * r['mfu']:.1f}% |")
        if "fp32" in p and "bf16" in p:
            ratio = p["bf16"]["tgt_tok_s"] / p["fp32"]["tgt_tok_s"]
            rows.append(f"| {name} training, bf16 / fp32 | {ratio:.2f}x |")
    return rows


def _peer_rows(result: dict) -> list[str]:
    rows, by = [], _by_config(result)
    for j in result.get("joeynmt", []):
        ours = by.get(Path(j["config"]).stem, {}).get("fp32")
        vs = f" (nmt fp32: {ours['tgt_tok_s'] / j['tgt_tok_s']:.2f}x)" if ours else ""
        rows.append(
            f"| {Path(j['config']).stem} training, JoeyNMT {j['joeynmt']} fp32, target tok/s | "
            f"{j['tgt_tok_s']:,.0f}{vs} |"
        )
    return rows


def _process_rows(result: dict) -> list[str]:
    proc = result.get("process")
    if not proc:
        return []
    rows = []
    for beam, row in proc["beams"].items():
        name = "greedy" if beam == "1" else f"beam {beam}"
        for key, ratio in row["ratios"].items():
            rows.append(f"| translate {proc['sentences']:,} lines, {name}, {key} | {ratio:.2f}x |")
    return rows


def table(result: dict) -> str:
    rows = ["| measure | value |", "|---|---:|"]
    rows += _training_rows(result) + _peer_rows(result) + _process_rows(result)
    if "quick_study" in result:
        rows.append(
            f"| `{result['quick_study']['command']}` | {result['quick_study']['seconds']:.0f} s |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", nargs="+", default=RECIPES, help="training configs")
    ap.add_argument("--steps", type=int, default=10, help="timed training steps per repetition")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (medians are reported)")
    ap.add_argument("--joeynmt", metavar="PYTHON", help="a Python with joeynmt installed")
    ap.add_argument("--joeynmt-updates", type=int, default=60)
    ap.add_argument("--run", help="a trained Transformer run, for translation against CT2")
    ap.add_argument("--src", help="source lines to translate (with --run)")
    ap.add_argument("--n", type=int, default=5000, help="first N lines of --src")
    ap.add_argument("--quick-study", action="store_true", help="also time the quick study")
    ap.add_argument("--out", required=True, help="JSON file")
    a = ap.parse_args(argv)
    if a.run and not a.src:
        ap.error("--run needs --src")
    result = {
        "command": "python " + " ".join([Path(sys.argv[0]).name] + (argv or sys.argv[1:])),
        "machine": machine(),
        "uptime_before": uptime(),
    }
    with tempfile.TemporaryDirectory(prefix="nmt-speed-") as tmp:
        tmp = Path(tmp)
        result["training"] = training(a.configs, a.reps, a.steps, tmp / "training.json")
        write_json(a.out, result)  # each part survives a failure of the next
        if a.joeynmt:
            peers = [c for c in a.configs if joeynmt_peer.has_peer(load_config(c).model)]
            result["joeynmt"] = joeynmt_peer.main(
                [*peers, "--python", a.joeynmt, "--updates", str(a.joeynmt_updates)]
            )
            write_json(a.out, result)
        if a.run:
            result["process"] = benchmark_process.main(
                [a.run, "--src", a.src, "--n", str(a.n), "--reps", str(a.reps)]
                + ["--out", str(tmp / "process.json")]
            )
            write_json(a.out, result)
        if a.quick_study:
            result["quick_study"] = quick_study(tmp / "quick")
    result["uptime_after"] = uptime()
    result["table"] = table(result)
    write_json(a.out, result)
    print(result["table"])
    return result


if __name__ == "__main__":
    main()
