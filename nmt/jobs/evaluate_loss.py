"""`nmt evaluate`'s loss by length: the model scores each reference teacher-forced, as `nmt score`
does (`nmt.text_translation.score_pairs`: an ensemble's averaged log-probabilities, a multilingual
model's forced tag counted), and `nmt.scoring.loss_by_length` pools the losses by source length."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import numpy as np

from nmt.config import DecodeConfig
from nmt.data.tokenizer import Tokenizer
from nmt.inference import Loaded
from nmt.scoring.loss_by_length import (
    loss_report,
    sentence_stats,
    write_sentence_losses,
)
from nmt.text_translation import score_pairs

log = logging.getLogger("nmt")
PLOT_FILE = "loss_by_length.png"


def reference_losses(
    m: Loaded,
    passes: list[Tokenizer],
    srcs: list[str],
    refs: list[str],
    bounds: list[int],
    decode: DecodeConfig,
    n_samples: int,
    scores: dict,
) -> Optional[np.ndarray]:
    """Put scores.json's `loss_by_length` into `scores`; each reference's (summed NLL, tokens).
    None for a pivot (two passes): no model reads the source and writes the reference."""
    if len(passes) > 1:
        return None
    log.info(f"scoring the {len(refs)} references teacher-forced for the loss by length")
    with m.autocast():
        rows = score_pairs(m.model, passes[0], srcs, refs, decode, m.device, where="the sources")
    token_log_probs = [r["token_log_probs"] for r in rows]
    scores["loss_by_length"] = loss_report(srcs, token_log_probs, bounds, n_samples)
    return sentence_stats(token_log_probs)


def write_loss_report(report: Path, stats: Optional[np.ndarray], scores: dict, name: str) -> None:
    """`sentence_nll.tsv` (for later paired comparisons) and `loss_by_length.png`."""
    from nmt.scoring.length_figures import plot_loss_by_length

    if stats is None:
        return
    write_sentence_losses(report, stats)
    plot_loss_by_length({name: scores["loss_by_length"]}, report / PLOT_FILE)
