"""Text in, text out: subword-encode, decode, detokenise; and the model's score of given pairs.

The one place where training validation, `nmt evaluate` and `nmt translate` turn sentences into
translations, so BLEU reported during training equals what `nmt evaluate` reports for the same
checkpoint, split and decoding settings. Scoring against references is `nmt.evaluate`'s: this
module needs no metric library, so `nmt translate` does not import one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

import torch

from nmt.config import DecodeConfig
from nmt.data.tokenizer import EOS, Tokenizer
from nmt.decode import translate_ids
from nmt.models.base import NMTModel
from nmt.search.hypotheses import Hypothesis, length_penalty
from nmt.search.scoring import score_ids

log = logging.getLogger("nmt")


@dataclass
class Translation:
    text: str  # best hypothesis, detokenised
    nbest: list[str]  # all returned hypotheses, best first
    scores: list[float]  # their length-normalised scores
    hyp: Optional[Hypothesis]  # best hypothesis (ids, attention); None for empty input
    src_pieces: list[str]  # source subword pieces (with </s>) the model saw


def encode_inputs(
    tok: Tokenizer, texts: list[str], max_tokens: int, where: str = "input"
) -> list[list[int]]:
    """Source ids, truncating over-long inputs (never dropping them) with a warning per line."""
    ids = tok.encode_src(texts)
    for i, s in enumerate(ids):
        if len(s) - 1 > max_tokens:
            log.warning(
                f"{where} line {i + 1}: {len(s) - 1} subword tokens, truncated to "
                f"{max_tokens} (decode.max_input_tokens)"
            )
            ids[i] = s[:max_tokens] + [EOS]
    return ids


def translate_texts(
    model: NMTModel,
    tok: Tokenizer,
    texts: list[str],
    cfg: DecodeConfig,
    beam: Optional[int] = None,
    nbest: Optional[int] = None,
    return_attn: bool = False,
    device: str | torch.device = "cpu",
    progress: bool = False,
    where: str = "input",
    prefixes: Optional[list[str]] = None,
) -> list[Translation]:
    """One Translation per input line, in order; blank lines give empty translations.

    `prefixes[i]` (target text) starts line i's translation; blank prefixes force nothing."""
    ids = encode_inputs(tok, texts, cfg.max_input_tokens, where)
    live = [i for i, t in enumerate(texts) if t.strip()]
    forced = None if prefixes is None else [tok.encode_tgt([prefixes[i]])[0] for i in live]
    hyps = translate_ids(
        model,
        [ids[i] for i in live],
        cfg,
        beam=beam,
        nbest=nbest,
        return_attn=return_attn,
        device=device,
        progress=progress,
        prefixes=forced,
    )
    k = nbest or 1  # blank inputs still give k (empty) hypotheses, like every other line
    out = [Translation("", [""] * k, [0.0] * k, None, tok.src_pieces(s)) for s in ids]
    for i, hs in zip(live, hyps):
        texts_i = tok.decode_tgt([h.tokens for h in hs])
        out[i] = Translation(
            texts_i[0], texts_i, [h.norm_score for h in hs], hs[0], tok.src_pieces(ids[i])
        )
    return out


def score_pairs(
    model: NMTModel,
    tok: Tokenizer,
    srcs: list[str],
    refs: list[str],
    cfg: DecodeConfig,
    device: str | torch.device = "cpu",
    where: str = "input",
) -> list[dict]:
    """Forced decoding of each (source, reference): its log-prob (EOS included), the score
    normalised as beam search ranks it (GNMT penalty with decode.alpha), per-token log-probs."""
    src_ids = encode_inputs(tok, srcs, cfg.max_input_tokens, where)
    tgt_ids = tok.encode_tgt(refs)
    out = []
    for ids, lps in zip(tgt_ids, score_ids(model, src_ids, tgt_ids, cfg, device)):
        score = sum(lps)
        out.append(
            {
                "score": score,
                "norm_score": score / length_penalty(len(lps), cfg.alpha),
                "tokens": tok.tgt_pieces(ids) + ["</s>"],
                "token_log_probs": lps,
            }
        )
    return out
