"""Sampling: greedy search drawing each token from the (tempered, top-k/top-p filtered)
distribution; its scores stay the model's own log-probs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from nmt.config import DecodeConfig
from nmt.search.hypotheses import NEG_INF


@dataclass
class Sampler:
    """Draw tokens from the tempered, top-k / top-p filtered distribution (seeded)."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    generator: Optional[torch.Generator] = None

    @classmethod
    def from_config(cls, cfg: DecodeConfig, device: str | torch.device) -> "Sampler":
        gen = torch.Generator(device=device).manual_seed(cfg.seed)
        return cls(cfg.temperature, cfg.top_k, cfg.top_p, gen)

    def pick(self, log_probs: Tensor) -> Tensor:
        logits = log_probs / self.temperature
        if self.top_k:
            kth = logits.topk(min(self.top_k, logits.size(-1)), -1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, NEG_INF)
        if self.top_p < 1.0:
            sorted_, order = logits.sort(-1, descending=True)
            before = sorted_.softmax(-1).cumsum(-1) - sorted_.softmax(-1)  # mass above each
            drop = torch.zeros_like(logits, dtype=torch.bool)
            drop.scatter_(1, order, before >= self.top_p)  # keeps the first
            logits = logits.masked_fill(drop, NEG_INF)
        return torch.multinomial(logits.softmax(-1), 1, generator=self.generator).squeeze(1)
