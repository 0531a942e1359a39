"""Token-budget batches of length-sorted examples, shuffled per epoch, shardable across ranks.

Sorting by length before cutting batches keeps padding low; shuffling the order of batches (and
ties within a length) with `seed + epoch` keeps epochs different yet reproducible, so a run can
resume from (epoch, batch index) exactly.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import Tensor

from nmt.data.tokenizer import BOS, EOS, PAD


def pad_batch(seqs: list[list[int]], pad: int = PAD) -> tuple[Tensor, Tensor]:
    """Right-pad id lists into a [B, L] long tensor and its bool mask (True = real token)."""
    width = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), max(width, 1)), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s, dtype=torch.long)
    lengths = torch.tensor([len(s) for s in seqs])
    mask = torch.arange(out.size(1))[None, :] < lengths[:, None]
    return out, mask


@dataclass
class Batch:
    src: Tensor        # [B, S] source ids ending in EOS
    src_mask: Tensor   # [B, S]
    tgt_in: Tensor     # [B, T] BOS + target
    tgt_out: Tensor    # [B, T] target + EOS (PAD where padded)
    n_tokens: int      # real target tokens (loss normaliser)
    n_src_tokens: int  # real source tokens
    n_slots: int       # padded slots, both sides

    @property
    def padding(self) -> float:
        return 1.0 - (self.n_tokens + self.n_src_tokens) / max(self.n_slots, 1)

    def to(self, device: torch.device | str) -> "Batch":
        nb = str(device) != "cpu"  # non_blocking copies only help towards a GPU
        return Batch(self.src.to(device, non_blocking=nb), self.src_mask.to(device, non_blocking=nb),
                     self.tgt_in.to(device, non_blocking=nb), self.tgt_out.to(device, non_blocking=nb),
                     self.n_tokens, self.n_src_tokens, self.n_slots)


def make_batch(src: list[list[int]], tgt: list[list[int]]) -> Batch:
    s, s_mask = pad_batch(src)
    t_in, _ = pad_batch([[BOS] + t for t in tgt])
    t_out, _ = pad_batch([t + [EOS] for t in tgt])
    n_tgt = sum(len(t) + 1 for t in tgt)
    n_src = sum(len(x) for x in src)
    return Batch(s, s_mask, t_in, t_out, n_tgt, n_src, s.numel() + t_out.numel())


class BucketBatcher:
    """Deterministic token-budget batches over (src, tgt) id lists.

    A batch's cost is its padded size: count * max(len(src), len(tgt) + 1) <= batch_tokens (or a
    fixed sentence count when batch_size > 0). With `world > 1`, every rank gets the same number of
    batches per epoch (the shortest tail is dropped) so DDP ranks stay in step.
    """

    def __init__(self, src: list[list[int]], tgt: list[list[int]], batch_tokens: int,
                 batch_size: int = 0, seed: int = 1, rank: int = 0, world: int = 1) -> None:
        assert len(src) == len(tgt)
        self.src, self.tgt = src, tgt
        self.batch_tokens, self.batch_size = batch_tokens, batch_size
        self.seed, self.rank, self.world = seed, rank, world

    def _cost(self, i: int) -> int:
        return max(len(self.src[i]), len(self.tgt[i]) + 1)

    def _sort_key(self, i: int) -> tuple[int, int, int]:
        # Source lengths in pairs, target length snaking up and down between neighbouring groups,
        # so consecutive examples are close on both sides (about 4% padding on Multi30k at 3k
        # tokens, against 6% for a plain (src, tgt) sort).
        s, t = len(self.src[i]), len(self.tgt[i])
        return s // 2, t if (s // 2) % 2 else -t, s

    def epoch(self, epoch: int) -> list[list[int]]:
        """This rank's batches (lists of example indices) for an epoch, in training order."""
        rng = random.Random(self.seed * 1_000_003 + epoch)
        order = list(range(len(self.src)))
        rng.shuffle(order)  # random tie-breaking among equal lengths
        order.sort(key=self._sort_key)
        batches: list[list[int]] = []
        cur: list[int] = []
        widest = 0
        for i in order:
            w = max(widest, self._cost(i))
            full = (len(cur) >= self.batch_size if self.batch_size > 0
                    else w * (len(cur) + 1) > self.batch_tokens)
            if cur and full:
                batches.append(cur)
                cur, w = [], self._cost(i)
            cur.append(i)
            widest = w
        if cur:
            batches.append(cur)
        rng.shuffle(batches)
        if self.world > 1:
            usable = len(batches) - len(batches) % self.world
            batches = batches[self.rank:usable:self.world]
        return batches

    def batch(self, indices: list[int]) -> Batch:
        return make_batch([self.src[i] for i in indices], [self.tgt[i] for i in indices])
