"""What lexical constraints cost: one run's split decoded with the same beam and batch with and
without a constraints file, in one process, as `nmt evaluate` decodes (its loader, precision
and autocast). The two alternate (without, with, without, with, ...) so that a change of load on
the machine falls on both; the JSON has every pass's seconds, their medians and the ratio, the
BLEU and chrF of each (sacreBLEU's defaults, as `nmt evaluate` prints them) and the share of
phrases met.

    python benchmarks/benchmark_constraints.py RUN --constraints FILE --split test --beam 5 \\
        --repeats 3 --threads 2 --out constraints.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import sacrebleu
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import machine, write_json  # noqa: E402
from nmt.data.constraints_file import constraints_record  # noqa: E402
from nmt.data.corpus import load_split  # noqa: E402
from nmt.decode import decode_settings  # noqa: E402
from nmt.inference import load_for_decoding  # noqa: E402
from nmt.text_translation import constraints_from_file, translate_texts  # noqa: E402


def one_pass(m, srcs: list[str], decode, pos=None, neg=None) -> tuple[float, list]:
    t = time.perf_counter()
    with m.autocast():
        out = translate_texts(m.model, m.tok, srcs, decode, positive=pos, negative=neg)
    return time.perf_counter() - t, out


def bench(run: str, constraints: str, split: str, beam: int, repeats: int) -> dict:
    m = load_for_decoding(run)
    decode = decode_settings(m.cfg.decode, beam, 1)
    srcs, refs = load_split(m.cfg.data, split)
    pos, neg = constraints_from_file(m.tok, srcs, constraints, decode)
    one_pass(m, srcs[:16], decode, pos[:16], neg[:16])  # warm-up: both paths' first calls
    one_pass(m, srcs[:16], decode)
    seconds: dict[str, list[float]] = {"without": [], "with": []}
    outs = {}
    for _ in range(repeats):
        for name, cons in (("without", (None, None)), ("with", (pos, neg))):
            s, outs[name] = one_pass(m, srcs, decode, *cons)
            seconds[name].append(round(s, 2))
            print(name, f"{s:.1f} s", file=sys.stderr, flush=True)
    result = {"run": run, "step": m.meta["step"], "split": split, "sentences": len(srcs)}
    for name, out in outs.items():
        hyps = [t.text for t in out]
        result[name] = {
            "seconds": seconds[name],
            "median_seconds": statistics.median(seconds[name]),
            "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
        }
    unmet = [None if t.hyp is None else t.hyp.unmet for t in outs["with"]]
    result["with"]["constraints"] = constraints_record(list(map(len, pos)), unmet)
    result["time_ratio"] = round(
        result["with"]["median_seconds"] / result["without"]["median_seconds"], 3
    )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("--constraints", required=True, help="a constraints file, one line per source")
    ap.add_argument("--split", default="test")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    res = {"command": "python " + " ".join(sys.argv), **machine(), "threads": a.threads}
    res.update(bench(a.run, a.constraints, a.split, a.beam, a.repeats))
    print(write_json(a.out, res, indent=1))


if __name__ == "__main__":
    main()
