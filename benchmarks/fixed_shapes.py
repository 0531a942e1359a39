#!/usr/bin/env python
"""What batches of a few fixed shapes would cost in padding, on a config's training data.

    python benchmarks/fixed_shapes.py configs/multi30k/de-en/transformer_local.yaml --widths 8 12 16
    python benchmarks/fixed_shapes.py configs/study/europarl.yaml transformer --widths 8 12 16

A compiled step (or a CUDA graph) is captured once per input shape. For each N, source and target
lengths are padded up to the nearest of N widths per side, the widths chosen to least padding on
this training data (dynamic programming over the length histogram: the best any N widths can do).
Printed per N: padding as pad tokens / real tokens, and how many distinct (source, target) width
pairs the data uses, the shapes a compiler would see even before the batch's row count.

N widths a side still make up to N * N shapes. So for each N the same data is also padded to N
(source, target) shapes in all (`nmt.data.shapes.best_shapes`, the shapes `data.shapes` trains
on: coordinate descent from quantile pairs, a local optimum), the count a compiler would really
see. The per-side padding is a lower bound on it: N shapes use at most N widths a side, and the
DP's widths pad each side least. Both are lower bounds on what fixed shapes cost: the rows of a
shape's last batch in an epoch are not counted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine, write_json  # noqa: E402
from nmt.data.shapes import best_shapes, covering_cost  # noqa: E402


def best_widths(lengths: np.ndarray, n: int) -> np.ndarray:
    """The n (or fewer) widths that pad `lengths` least: best[k, b] is the least padding of all
    lengths <= b with k widths, the largest being b."""
    top = int(lengths.max())
    count = np.cumsum(np.bincount(lengths, minlength=top + 1)).astype(float)
    total = np.cumsum(np.bincount(lengths, weights=lengths, minlength=top + 1))
    best = np.full((n + 1, top + 1), np.inf)
    best[0, 0] = 0.0
    prev = np.zeros((n + 1, top + 1), dtype=np.int64)
    for k in range(1, n + 1):
        for b in range(1, top + 1):
            a = np.arange(b)
            cost = best[k - 1, a] + b * (count[b] - count[a]) - (total[b] - total[a])
            prev[k, b] = int(np.argmin(cost))
            best[k, b] = cost[prev[k, b]]
    k, b, widths = int(np.argmin(best[1:, top])) + 1, top, []
    while k > 0 and b > 0:
        widths.append(b)
        b, k = prev[k, b], k - 1
    return np.array(sorted(widths))


def padded(lengths: np.ndarray, widths: np.ndarray) -> np.ndarray:
    return widths[np.searchsorted(widths, lengths)]


def measure(src: np.ndarray, tgt: np.ndarray, n: int) -> dict:
    """Padding and distinct shape pairs with n widths per side (targets count their EOS/BOS)."""
    ws, wt = best_widths(src, n), best_widths(tgt, n)
    ps, pt = padded(src, ws), padded(tgt, wt)
    real = int(src.sum() + tgt.sum())
    return {
        "widths_per_side": n,
        "padding_over_real": (int(ps.sum() + pt.sum()) - real) / real,
        "shape_pairs": len(set(zip(ps.tolist(), pt.tolist()))),
        "source_widths": ws.tolist(),
        "target_widths": wt.tolist(),
    }


def measure_shapes(src: np.ndarray, tgt: np.ndarray, n: int) -> dict:
    """Padding with n (source, target) shapes in all."""
    shapes = best_shapes(src, tgt, n)
    real = int(src.sum() + tgt.sum())
    return {
        "shapes": len(shapes),
        "padding_over_real": (float(covering_cost(shapes, src, tgt).sum()) - real) / real,
        "source_target_widths": shapes.tolist(),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", help="a training config, or a study YAML with MODEL")
    ap.add_argument("model", nargs="?", help="model name in the study")
    ap.add_argument("--widths", type=int, nargs="+", default=[8, 12, 16])
    ap.add_argument("--out", help="JSON file (default: print only)")
    args = ap.parse_args(argv)

    from nmt.config.load import load_config
    from nmt.data.prepared import prepared_corpus
    from nmt.study import load_study, model_configs

    if args.model:
        tmp = Path(tempfile.mkdtemp())
        cfg = model_configs(load_study(args.config), args.config, tmp)[args.model]
    else:
        cfg = load_config(args.config)
    corpus = prepared_corpus(cfg)
    src = np.asarray(corpus.src_len, dtype=np.int64)
    tgt = np.asarray(corpus.tgt_len, dtype=np.int64) + 1
    out = {
        "command": "python " + " ".join([Path(__file__).name, *(argv or sys.argv[1:])]),
        "machine": machine(),
        "pairs": len(src),
        "results": [measure(src, tgt, n) for n in args.widths],
        "shapes": [measure_shapes(src, tgt, n) for n in args.widths],
    }
    for r, sh in zip(out["results"], out["shapes"]):
        print(
            f"{r['widths_per_side']} widths a side: padding {100 * r['padding_over_real']:.1f}% "
            f"of real tokens, {r['shape_pairs']} (source, target) width pairs; "
            f"{sh['shapes']} shapes in all: padding {100 * sh['padding_over_real']:.1f}%"
        )
    if args.out:
        write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
