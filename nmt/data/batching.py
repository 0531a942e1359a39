"""Token-budget batches of length-sorted examples, shuffled per epoch, shardable across ranks.

Sorting by length before cutting batches keeps padding low; shuffling the order of batches (and
ties within a length) with `seed + epoch` keeps epochs different yet reproducible, so a run can
resume from (epoch, batch index) exactly. The plan of an epoch is computed from numpy arrays of
lengths only; a batch's ids are read (from memory-mapped files for the training corpus) when it is
built, and the next batches are built, padded and (towards CUDA) pinned in a background thread
while the current one trains.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from nmt.data.heap import give_back_freed_memory
from nmt.data.ragged import IdColumn
from nmt.data.shapes import best_shapes, covering_cost, shape_of
from nmt.data.temperature import sampled_examples
from nmt.data.tokenizer import BOS, EOS, PAD


def pad_batch(seqs: list[list[int]], pad: int = PAD) -> tuple[Tensor, Tensor]:
    """Right-pad id lists into a [B, L] long tensor and its bool mask (True = real token)."""
    width = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), max(width, 1)), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    lengths = torch.tensor([len(s) for s in seqs])
    mask = torch.arange(out.size(1))[None, :] < lengths[:, None]
    return out, mask


@dataclass
class Batch:
    src: Tensor  # [B, S] source ids ending in EOS
    src_mask: Tensor  # [B, S]
    tgt_in: Tensor  # [B, T] BOS + target
    tgt_out: Tensor  # [B, T] target + EOS (PAD where padded)
    n_tokens: int  # real target tokens (loss normaliser)
    n_src_tokens: int  # real source tokens
    n_slots: int  # padded slots, both sides

    @property
    def padding(self) -> float:
        return 1.0 - (self.n_tokens + self.n_src_tokens) / max(self.n_slots, 1)

    def pin_memory(self) -> "Batch":
        """Page-locked copies, so `to(cuda)` can copy asynchronously while the GPU computes."""
        return Batch(
            self.src.pin_memory(),
            self.src_mask.pin_memory(),
            self.tgt_in.pin_memory(),
            self.tgt_out.pin_memory(),
            self.n_tokens,
            self.n_src_tokens,
            self.n_slots,
        )

    def to(self, device: torch.device | str) -> "Batch":
        nb = str(device) != "cpu"  # non_blocking copies only help towards a GPU
        return Batch(
            self.src.to(device, non_blocking=nb),
            self.src_mask.to(device, non_blocking=nb),
            self.tgt_in.to(device, non_blocking=nb),
            self.tgt_out.to(device, non_blocking=nb),
            self.n_tokens,
            self.n_src_tokens,
            self.n_slots,
        )


def make_batch(
    src: Sequence[Sequence[int]],
    tgt: Sequence[Sequence[int]],
    widths: Optional[tuple[int, int]] = None,
) -> Batch:
    """Pad source rows (ending in EOS) and BOS+target / target+EOS rows into one Batch: to the
    longest row of each side, or to `widths` (source, target with its BOS/EOS) when given."""
    ls = np.fromiter((len(s) for s in src), dtype=np.int64, count=len(src))
    lt = np.fromiter((len(t) for t in tgt), dtype=np.int64, count=len(tgt))
    b = len(src)
    s_width, t_width = widths or (max(int(ls.max(initial=0)), 1), int(lt.max(initial=0)) + 1)
    s = np.full((b, s_width), PAD, dtype=np.int64)
    t_in = np.full((b, t_width), PAD, dtype=np.int64)
    t_out = np.full((b, t_width), PAD, dtype=np.int64)
    t_in[:, 0] = BOS
    for i in range(b):
        s[i, : ls[i]] = src[i]
        t_in[i, 1 : lt[i] + 1] = tgt[i]
        t_out[i, : lt[i]] = tgt[i]
    t_out[np.arange(b), lt] = EOS
    s_t = torch.from_numpy(s)
    mask = torch.arange(s.shape[1])[None, :] < torch.from_numpy(ls)[:, None]
    return Batch(
        s_t,
        mask,
        torch.from_numpy(t_in),
        torch.from_numpy(t_out),
        int(lt.sum() + b),
        int(ls.sum()),
        s.size + t_out.size,
    )


def sort_order(src_len: np.ndarray, tgt_len: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices sorted by source length in pairs, the target length snaking up and down between
    neighbouring groups, so consecutive examples are close on both sides (about 4% padding on
    Multi30k at 3k tokens, against 6% for a plain (src, tgt) sort); ties in random order."""
    n = len(src_len)
    # int32 keys and indices where they fit: planning an epoch of 36M pairs briefly held 56
    # bytes a pair of temporaries with int64 ones (the same order either way).
    index = np.int32 if n < 2**31 else np.int64
    perm = rng.permutation(n).astype(index)
    s, t = src_len[perm].astype(np.int32), tgt_len[perm].astype(np.int32)
    half = s // 2
    snake = np.where(half % 2 == 1, t, -t)
    del t
    return perm[np.lexsort((s, snake, half))]  # the last key sorts first; lexsort is stable


def cut_points(cost: np.ndarray, batch_tokens: int, batch_size: int) -> np.ndarray:
    """Start offsets of consecutive batches over costs in training order: each batch is the
    longest run whose count * (widest cost) fits `batch_tokens` (at least one example), or
    `batch_size` examples. One numpy step per batch, never a Python step per example."""
    n = len(cost)
    if batch_size > 0:
        return np.arange(0, n, batch_size)
    starts = []
    p = 0
    while p < n:
        window = max(1, batch_tokens // max(int(cost[p]), 1)) + 1  # no batch can be longer
        widest = np.maximum.accumulate(cost[p : p + window])
        fits = widest * np.arange(1, len(widest) + 1) <= batch_tokens
        size = len(widest) if fits.all() else max(1, int(np.argmin(fits)))
        starts.append(p)
        p += size
    return np.asarray(starts, dtype=np.int64)


class _Prefetcher:
    """Builds the batches after the one asked for in one background thread, in plan order."""

    def __init__(self, build, depth: int) -> None:
        self.build, self.depth = build, depth
        self.pool: Optional[ThreadPoolExecutor] = None
        self.plan: list[np.ndarray] = []
        self.pos: dict[int, int] = {}
        self.ready: dict[int, Future] = {}

    def reset(self, plan: list[np.ndarray]) -> None:
        for f in self.ready.values():
            f.cancel()
        self.plan, self.ready = plan, {}
        self.pos = {id(ix): k for k, ix in enumerate(plan)}

    def get(self, indices) -> Batch:
        k = self.pos.get(id(indices))
        if k is None or self.depth <= 0:
            return self.build(indices)
        fut = self.ready.pop(k, None)
        for old in [j for j in self.ready if j < k]:
            self.ready.pop(old).cancel()
        if self.pool is None:
            self.pool = ThreadPoolExecutor(1, thread_name_prefix="nmt-batches")
        for j in range(k + 1, min(k + 1 + self.depth, len(self.plan))):
            if j not in self.ready:
                self.ready[j] = self.pool.submit(self.build, self.plan[j])
        return fut.result() if fut is not None else self.build(indices)


class BucketBatcher:
    """Deterministic token-budget batches over (src, tgt) id columns.

    A batch's cost is its padded size: count * max(len(src), len(tgt) + 1) <= batch_tokens (or a
    fixed sentence count when batch_size > 0). With `world > 1`, every rank gets the same number of
    batches per epoch (the shortest tail is dropped) so DDP ranks stay in step. `rows` maps the
    batcher's example indices to rows of the columns (the pairs kept by filtering). `groups`: each
    example's direction (multilingual training), sampled per epoch with `temperature`
    (nmt.data.temperature); the directions' pairs are sorted and batched together, so batches mix
    directions. `shapes` > 0: every batch is padded to one of that many (source, target) widths
    chosen for these lengths (nmt.data.shapes) and holds a fixed number of rows per shape (the
    last batch of a shape in an epoch fewer), so a step compiled with static shapes is captured
    once per shape.
    """

    def __init__(
        self,
        src: IdColumn,
        tgt: IdColumn,
        batch_tokens: int,
        batch_size: int = 0,
        seed: int = 1,
        rank: int = 0,
        world: int = 1,
        rows: Optional[np.ndarray] = None,
        pin: bool = False,
        prefetch: int = 2,
        lengths: Optional[tuple[np.ndarray, np.ndarray]] = None,
        groups: Optional[np.ndarray] = None,
        temperature: float = 1.0,
        shapes: int = 0,
    ) -> None:
        assert len(src) == len(tgt)
        self.src, self.tgt, self.rows = src, tgt, rows
        self.groups, self.temperature = groups, temperature
        # `lengths`: tokens per example, when stored apart (the prepared corpus maps them, shared
        # by every rank); computing them from the columns' offsets would read pages spread over
        # the whole file.
        if lengths is None:
            src_len, tgt_len = src.lengths(), tgt.lengths()
            lengths = (src_len, tgt_len) if rows is None else (src_len[rows], tgt_len[rows])
        self.src_len, self.tgt_len = (np.asarray(x, dtype=np.int32) for x in lengths)
        assert len(self.src_len) == len(self.tgt_len) == (len(src) if rows is None else len(rows))
        self.batch_tokens, self.batch_size = batch_tokens, batch_size
        self.seed, self.rank, self.world, self.pin = seed, rank, world, pin
        self._prefetch = _Prefetcher(self._build, prefetch)
        self.shapes: Optional[np.ndarray] = None
        if shapes > 0 and len(self.src_len):
            self.shapes = best_shapes(self.src_len, self.tgt_len + 1, shapes)
            self.shape_index = shape_of(self.shapes, self.src_len, self.tgt_len + 1)
            # rows so that rows * (wider side) stays within batch_tokens, as a bucketed batch's
            self.shape_rows = (
                np.full(len(self.shapes), batch_size)
                if batch_size > 0
                else np.maximum(1, batch_tokens // self.shapes.max(1))
            )

    @classmethod
    def from_lists(
        cls,
        src: Sequence[Sequence[int]],
        tgt: Sequence[Sequence[int]],
        batch_tokens: int,
        batch_size: int = 0,
        **kw,
    ) -> "BucketBatcher":
        return cls(
            IdColumn.from_lists(src), IdColumn.from_lists(tgt), batch_tokens, batch_size, **kw
        )

    def __len__(self) -> int:
        return len(self.src_len)

    def plan(self, epoch: int) -> list[np.ndarray]:
        """All batches of an epoch (before sharding), in training order."""
        rng = np.random.default_rng(self.seed * 1_000_003 + epoch)
        pool = None
        if self.groups is not None:  # its own generator: the plain plan's draws stay the same
            draw = np.random.default_rng([self.seed, epoch, 0x7E])
            pool = sampled_examples(self.groups, self.temperature, draw)
        if pool is None:
            order = sort_order(self.src_len, self.tgt_len, rng)
        else:
            order = pool[sort_order(self.src_len[pool], self.tgt_len[pool], rng)]
        if self.shapes is not None:
            batches = self._shaped(order)
        else:
            cost = np.maximum(self.src_len, self.tgt_len + 1)[order]
            batches = np.split(order, cut_points(cost, self.batch_tokens, self.batch_size)[1:])
        return [batches[k] for k in rng.permutation(len(batches))] if len(order) else []

    def epoch(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches (arrays of example indices) for an epoch, in training order."""
        batches = self.plan(epoch)
        if self.world > 1:
            usable = len(batches) - len(batches) % self.world
            mine = batches[self.rank : usable : self.world]
            # One array of this rank's examples: the others' share of the plan can go.
            flat = np.concatenate(mine) if mine else np.zeros(0, dtype=np.int64)
            batches = np.split(flat, np.cumsum([len(b) for b in mine[:-1]], dtype=np.int64))
        self._prefetch.reset(batches)
        give_back_freed_memory()  # the plan's temporaries: 50 MB at 1.8M pairs, in every rank
        return batches

    def _shaped(self, order: np.ndarray) -> list[np.ndarray]:
        """The examples in `order` grouped by shape (keeping that order within a shape), each
        group cut into batches of its shape's rows."""
        k = self.shape_index[order]
        grouped = order[np.argsort(k, kind="stable")]
        ends = np.cumsum(np.bincount(k, minlength=len(self.shapes)))
        batches = []
        for shape, (start, end) in enumerate(zip([0, *ends[:-1]], ends)):
            rows = int(self.shape_rows[shape])
            batches += [grouped[i : min(i + rows, end)] for i in range(start, end, rows)]
        return batches

    def shape_line(self) -> str:
        """The fixed shapes and the padding they cost on these lengths, for the log ('' when
        batches are token-bucketed)."""
        if self.shapes is None:
            return ""
        real = int(self.src_len.sum() + self.tgt_len.sum() + len(self))
        slots = covering_cost(self.shapes, self.src_len, self.tgt_len + 1).sum()
        shown = ", ".join(f"{s}x{t} ({r} rows)" for (s, t), r in zip(self.shapes, self.shape_rows))
        return (
            f"fixed batch shapes (source x target widths): {shown}; padding "
            f"{100 * (slots - real) / real:.1f}% of real tokens"
        )

    def _build(self, indices: np.ndarray) -> Batch:
        rows = np.asarray(indices) if self.rows is None else self.rows[np.asarray(indices)]
        widths = None
        if self.shapes is not None and len(indices):
            widths = tuple(int(w) for w in self.shapes[self.shape_index[indices[0]]])
        batch = make_batch(self.src.rows(rows), self.tgt.rows(rows), widths)
        return batch.pin_memory() if self.pin else batch

    def batch(self, indices: np.ndarray) -> Batch:
        """The padded batch of these examples (prefetched when they are the plan's next)."""
        return self._prefetch.get(indices)
