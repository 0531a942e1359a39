"""Beam search's stopping rules side by side: BLEU and sentences/s of one run's test split.

stop 21's rule (a sentence waits for `beam` finished hypotheses, plus a greedy pass that keeps
beam >= greedy), the same without the greedy pass, and early stopping (the default), all with
nmt's fp32 CPU decoding (oneDNN linears), in one process, one after the other.

    python benchmarks/benchmark_beam_stop.py RUN [RUN ...] --beam 5 --threads 2 --out beam_stop.json
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import sacrebleu
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import cpu_model, write_json  # noqa: E402
from nmt.checkpoint import load_model  # noqa: E402
from nmt.data.corpus import load_split  # noqa: E402
from nmt.models.onednn import for_cpu_decoding  # noqa: E402
from nmt.text_translation import translate_texts  # noqa: E402

RULES = {
    "beam finished + greedy floor (stop 21)": dict(early_stop=False, greedy_floor=True),
    "beam finished": dict(early_stop=False, greedy_floor=False),
    "early stop (default)": dict(early_stop=True, greedy_floor=False),
}


def bench(run: str, beam: int) -> dict:
    cfg, model, tok, meta = load_model(run)
    model = for_cpu_decoding(model, "cpu", "fp32")  # as `nmt translate` decodes
    src, ref = load_split(cfg.data, cfg.eval.split)
    translate_texts(model, tok, src[:16], cfg.decode, beam=beam)  # warm-up
    out = {"run": run, "step": meta["step"], "sentences": len(src), "rules": {}}
    for name, rule in RULES.items():
        dec = dataclasses.replace(cfg.decode, **rule)
        t = time.perf_counter()
        hyps = [h.text for h in translate_texts(model, tok, src, dec, beam=beam)]
        seconds = time.perf_counter() - t
        out["rules"][name] = {
            **rule,
            "seconds": round(seconds, 2),
            "sent_s": round(len(src) / seconds, 1),
            "bleu": round(sacrebleu.corpus_bleu(hyps, [ref]).score, 2),
        }
        print(name, out["rules"][name], file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    res = {"command": "python " + " ".join(sys.argv), "cpu": cpu_model(), "threads": a.threads}
    res["runs"] = [bench(run, a.beam) for run in a.runs]
    write_json(a.out, res, indent=1)


if __name__ == "__main__":
    main()
