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
from nmt.errors import NmtError
from nmt.inference import Loaded
from nmt.scoring.loss_by_length import (
    loss_report,
    read_sentence_losses,
    sentence_stats,
    write_sentence_losses,
)
from nmt.scoring.metrics import load_scores
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
    reuse: Optional[str] = None,
) -> Optional[np.ndarray]:
    """Put scores.json's `loss_by_length` into `scores`; each reference's (summed NLL, tokens).
    None for a pivot (two passes): no model reads the source and writes the reference.
    `reuse`: another beam's report of this checkpoint, whose loss is taken when it answers."""
    if len(passes) > 1:
        log.warning(
            "no loss on the reference: a pivot translates in two passes, so no model reads the "
            "source and writes the reference"
        )
        return None
    reused = reused_losses(reuse, scores)
    if reused is not None:
        return reused
    log.info(f"scoring the {len(refs)} references teacher-forced for the loss by length")
    with m.autocast():
        rows = score_pairs(m.model, passes[0], srcs, refs, decode, m.device, where="the sources")
    token_log_probs = [r["token_log_probs"] for r in rows]
    scores["loss_by_length"] = loss_report(srcs, token_log_probs, bounds, n_samples)
    return sentence_stats(token_log_probs)


def reused_losses(report: Optional[str], scores: dict) -> Optional[np.ndarray]:
    """The loss by length of `report`, put into `scores`, when that report scored the same
    checkpoint on the same sentences with the same buckets, bootstrap and decoding settings but
    the beam (teacher-forced, the loss does not depend on the beam: a study scoring two beams
    computes it once); each reference's (summed NLL, tokens), or None when there is none."""
    if not report:
        return None
    try:
        old, stats = load_scores(report), read_sentence_losses(report)
    except (NmtError, OSError, ValueError):
        return None
    if stats is None or not old.get("loss_by_length") or len(stats) != scores["n"]:
        return None
    same = ("checkpoint", "step", "test_set", "bootstrap")
    spans = [[(b["lo"], b["hi"]) for b in x.get("buckets", [])] for x in (old, scores)]
    decoding = [{**(x.get("decode") or {}), "beam": None} for x in (old, scores)]
    differs = any(old.get(k) != scores.get(k) for k in same)
    if differs or spans[0] != spans[1] or decoding[0] != decoding[1]:
        return None
    log.info(f"the loss by length: reused from {report} (the same checkpoint and sentences)")
    scores["loss_by_length"] = old["loss_by_length"]
    return stats


def write_loss_report(report: Path, stats: Optional[np.ndarray], scores: dict, name: str) -> None:
    """`sentence_nll.tsv` (for later paired comparisons) and `loss_by_length.png`."""
    from nmt.scoring.length_figures import plot_loss_by_length

    if stats is None:
        return
    write_sentence_losses(report, stats)
    plot_loss_by_length({name: scores["loss_by_length"]}, report / PLOT_FILE)
