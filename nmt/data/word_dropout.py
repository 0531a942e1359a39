"""Word dropout on the source side: a regulariser for small corpora.

In training, each real source piece (not EOS, not padding) is replaced by <unk> with probability
p, so the model cannot lean on any single source word and learns to translate around unknown
ones (in the spirit of the word dropout that Sennrich & Zhang 2019 found to help low-resource
NMT; Gal & Ghahramani 2016). The draws come from torch's generator, which checkpoints save, so a
resumed run drops the same pieces.
"""

from __future__ import annotations

import dataclasses

import torch

from nmt.data.batching import Batch
from nmt.data.tokenizer import EOS, UNK


def drop_source_words(batch: Batch, p: float) -> Batch:
    """The batch with each real source piece but EOS replaced by UNK with probability p."""
    if p <= 0.0:
        return batch
    src = batch.src
    hit = (torch.rand(src.shape, device=src.device) < p) & batch.src_mask & (src != EOS)
    return dataclasses.replace(batch, src=src.masked_fill(hit, UNK))
