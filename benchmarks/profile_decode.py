#!/usr/bin/env python
"""Where decoding time goes: torch.profiler over `Translator.translate` of a trained run.

    python benchmarks/profile_decode.py RUN --src ../shared/data/multi30k/val.de --n 500 \
        --beam 5 --threads 2 --out profile-decode.json

The run is loaded as `nmt translate` loads it (fp32 on a CPU unless --precision, --int8 for the
dynamic int8 model); the first 50 lines are translated once to warm up, then the first N lines
under the profiler. The JSON (`profile_ops.breakdown`) holds the top ops by self CPU time, the
matmul share, the share of wall time inside ops, and time by phase (encode, init_state,
decode_step, and 'other': the search's bookkeeping between steps) and by layer.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import machine, write_json  # noqa: E402
from benchmarks.profile_ops import breakdown, label_model  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="run directory or checkpoint")
    ap.add_argument("--src", required=True, help="source lines")
    ap.add_argument("--n", type=int, default=500, help="first N lines of --src")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default=None)
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--out", help="JSON file (default: stdout)")
    args = ap.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile

    from nmt.api import Translator

    torch.set_num_threads(args.threads)
    lines = Path(args.src).read_text(encoding="utf-8").splitlines()[: args.n]
    translator = Translator.load(args.run, device="cpu", precision=args.precision, int8=args.int8)
    label_model(translator.model)
    translator.translate(lines[:50], beam=args.beam)
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        translator.translate(lines, beam=args.beam)
    wall = time.perf_counter() - t
    out = {
        "command": "python " + " ".join([Path(__file__).name, *(argv or sys.argv[1:])]),
        "machine": machine(),
        "run": args.run,
        "sentences": len(lines),
        "beam": args.beam,
        "precision": args.precision or "fp32",
        "int8": args.int8,
        "threads": args.threads,
        **breakdown(prof, wall, args.top),
    }
    print(write_json(args.out, out, indent=1) if args.out else json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
