"""Forced decoding: the model's log-prob of each token of given targets, through the same
`decode_step` interface the searches use."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nmt.config import DecodeConfig
from nmt.data.batching import pad_batch
from nmt.search.rows import eval_mode, length_batches

if TYPE_CHECKING:
    from nmt.models.base import NMTModel


@torch.inference_mode()
def force_decode(
    model: "NMTModel", src: Tensor, src_mask: Tensor, tgt: list[list[int]]
) -> list[list[float]]:
    """Log-prob of each token of each target (ids without EOS), the final EOS included."""
    out_ids, out_mask = pad_batch([t + [model.eos_id] for t in tgt], model.pad_id)
    out_ids, out_mask = out_ids.to(src.device), out_mask.to(src.device)
    prev = torch.full((src.size(0),), model.bos_id, dtype=torch.long, device=src.device)
    with eval_mode(model):
        state = model.init_state(model.encode(src, src_mask))
        steps = []
        for t in range(out_ids.size(1)):
            log_probs, state, _ = model.decode_step(state, prev)
            steps.append(log_probs.float().gather(1, out_ids[:, t : t + 1]).squeeze(1))
            prev = out_ids[:, t]
    lp = torch.stack(steps, 1).cpu()
    return [lp[i, : int(n)].tolist() for i, n in enumerate(out_mask.sum(1))]


def score_ids(
    model: "NMTModel",
    src_ids: list[list[int]],
    tgt_ids: list[list[int]],
    cfg: DecodeConfig,
    device: str | torch.device = "cpu",
) -> list[list[float]]:
    """force_decode over length-sorted batches of cfg.batch_tokens; input order out."""
    lengths = [max(len(s), len(t) + 1) for s, t in zip(src_ids, tgt_ids)]
    order = sorted(range(len(src_ids)), key=lambda i: -lengths[i])
    results: list[list[float]] = [[] for _ in src_ids]
    for batch in length_batches(order, lengths, cfg.batch_tokens):
        src, mask = pad_batch([src_ids[i] for i in batch], model.pad_id)
        for i, lp in zip(
            batch, force_decode(model, src.to(device), mask.to(device), [tgt_ids[i] for i in batch])
        ):
            results[i] = lp
    return results
