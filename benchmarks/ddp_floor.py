"""The memory floor of a torch training process: no corpus, no nmt, one Adam step.

`benchmarks/benchmark_data.py --only floor` runs this alone and under a 2-process `torchrun`
(gloo), measured like `nmt train`, to show what a second rank costs whatever the trainer: the
interpreter, torch, its process group and DDP, and what torch imports on the first optimiser
step (`torch.optim` imports `torch._dynamo`, which imports sympy). The model has 389k
parameters (the toy transformer has 410k); a batch of 3,000 random tokens goes through it.
"""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from torch import nn


class Model(nn.Module):
    """389k parameters, about the toy transformer's 410k: embedding, feed-forward, output."""

    def __init__(self, vocab: int = 2760, d: int = 64, ff: int = 256) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.ReLU(), nn.Linear(ff, d))
        self.out = nn.Linear(d, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.ff(self.emb(tokens)))


def main() -> None:
    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = Model()
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    tokens = torch.randint(0, 2760, (100, 30))
    loss = nn.functional.cross_entropy(net(tokens).flatten(0, 1), tokens.flatten())
    loss.backward()
    opt.step()
    print(
        f"step 1: loss {loss.item():.4f} ({sum(p.numel() for p in model.parameters())} parameters)"
    )
    time.sleep(1.0)  # let the sampler (every 0.1 s) see the peak
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
