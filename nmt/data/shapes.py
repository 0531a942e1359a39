"""A few fixed (source width, target width) batch shapes for a corpus, and each pair's shape.

A compiled step with static shapes (or a CUDA graph) is captured once per input shape, where
token-bucketed batches bring a new shape almost every step. `best_shapes` picks n shapes that pad
the corpus little: each pair is padded to its cheapest covering shape (fewest slots, source plus
target), and the shapes are found by coordinate descent from quantile pairs (a local optimum).
Widths count what a batch holds: the source with its EOS, the target with its BOS or EOS.
"""

from __future__ import annotations

import numpy as np


def _slots(shapes: np.ndarray, src: np.ndarray, tgt: np.ndarray, none: float) -> np.ndarray:
    """[pairs, shapes]: the slots each shape gives each (src, tgt) pair, `none` where it does
    not cover the pair."""
    covers = (shapes[None, :, 0] >= src[:, None]) & (shapes[None, :, 1] >= tgt[:, None])
    return np.where(covers, shapes.sum(1)[None, :], none)


def covering_cost(shapes: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """Slots of each (src, tgt) length pair in its cheapest covering shape (inf where none)."""
    return _slots(shapes, src, tgt, np.inf).min(1)


def shape_of(shapes: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """Index of each pair's cheapest covering shape (the first of equals). A batch of pairs
    that share a shape maps to it too: its longest lengths are covered by no cheaper shape."""
    return _slots(shapes, src, tgt, np.iinfo(np.int64).max).argmin(1)


def best_shapes(src: np.ndarray, tgt: np.ndarray, n: int, sweeps: int = 6) -> np.ndarray:
    """n (or fewer) (source width, target width) shapes, sorted, that pad these pairs little;
    the last is (longest source, longest target), so every pair fits. Each sweep moves one
    width of one shape at a time to its best value."""
    src, tgt = np.asarray(src, dtype=np.int64), np.asarray(tgt, dtype=np.int64)
    cells, count = np.unique(np.stack([src, tgt], 1), axis=0, return_counts=True)
    cs, ct = cells[:, 0], cells[:, 1]
    top = (int(src.max()), int(tgt.max()))
    q = np.linspace(0, 1, n + 1)[1:]
    shapes = np.stack([np.quantile(src, q), np.quantile(tgt, q)], 1).astype(np.int64)
    shapes[-1] = top

    def total(s: np.ndarray) -> float:
        return float((covering_cost(s, cs, ct) * count).sum())

    best = total(shapes)
    for _ in range(sweeps):
        before = best
        for k in range(n - 1):
            for side in (0, 1):
                for width in range(1, top[side] + 1):
                    trial = shapes.copy()
                    trial[k, side] = width
                    cost = total(trial)
                    if cost < best:
                        shapes, best = trial, cost
        if best == before:
            break
    return np.unique(shapes, axis=0)
