"""Text in, text out: subword-encode, decode, detokenise; and the model's score of given pairs.

The one place where training validation, `nmt evaluate` and `nmt translate` turn sentences into
translations, so BLEU reported during training equals what `nmt evaluate` reports for the same
checkpoint, split and decoding settings. Scoring against references is `nmt.scoring.metrics`'s: this
module needs no metric library, so `nmt translate` does not import one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import torch

from nmt.config import DecodeConfig
from nmt.data.constraints_file import (
    LineConstraints,
    check_limits,
    encode_line,
    missing,
    read_constraints,
)
from nmt.data.language_pieces import masked_pieces
from nmt.data.tokenizer import EOS, Tokenizer
from nmt.decode import decode_settings, translate_ids
from nmt.errors import NmtError
from nmt.models.base import NMTModel
from nmt.search.constraints import Phrases
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
    pivot: Optional[str] = None  # through a pivot: the text the last pass translated
    # positive constraint phrases the text misses as whole words (`holds`); None without any
    unmet: Optional[int] = None
    lead: int = 0  # forced ids first in hyp.tokens that are no text (a target-mode tag)

    @property
    def tokens(self) -> list[int]:
        """The best hypothesis' ids as text: without the forced tag (`lead`)."""
        return [] if self.hyp is None else self.hyp.tokens[self.lead :]


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
    positive: Optional[Phrases] = None,
    negative: Optional[Phrases] = None,
) -> list[Translation]:
    """One Translation per input line, in order; blank lines give empty translations. cfg says
    how to decode (`beam` and `nbest`, if given, replace its own: see `decode_settings`).

    `prefixes[i]` (target text) starts line i's translation; blank prefixes force nothing.
    `positive[i]`/`negative[i]` (target ids, from `encode_constraints`) must / must not appear
    in it; lines with neither are decoded apart, exactly as without constraints. Each
    translation's `unmet` counts the positive phrases its text misses as whole words. A
    target-mode direction view (`DirectionView`) forces its tag: blank prefixes where none
    given. cfg.language_vocab masks the pieces rare in the target language (`tok.piece_counts`)."""
    lead = len(tok.forced_prefix())
    if prefixes is None and lead:
        prefixes = [""] * len(texts)
    cfg = decode_settings(cfg, beam, nbest)
    ids = encode_inputs(tok, texts, cfg.max_input_tokens, where)
    live = [i for i, t in enumerate(texts) if t.strip()]
    k = cfg.nbest  # blank inputs still give k (empty) hypotheses, like every other line
    masked = masked_pieces(tok, cfg.language_vocab)
    out = [Translation("", [""] * k, [0.0] * k, None, tok.src_pieces(s)) for s in ids]
    for group, pos, neg in _constraint_groups(live, len(texts), positive, negative):
        hyps = translate_ids(
            model,
            [ids[i] for i in group],
            cfg,
            return_attn=return_attn,
            device=device,
            progress=progress,
            prefixes=None if prefixes is None else tok.encode_tgt([prefixes[i] for i in group]),
            positive_constraints=pos,
            negative_constraints=neg,
            word_joiners=None if pos is None else tok.word_joiners,
            target_pieces=tok.tgt_piece_texts if neg and any(neg) else None,
            masked=masked,
        )
        wanted = None if pos is None else [tok.decode_tgt(ps) if ps else [] for ps in pos]
        for j, (i, hs) in enumerate(zip(group, hyps)):
            if not hs:  # every row at -inf: a bug of the search, not the user's
                raise RuntimeError(f"{where} line {i + 1}: the search returned no hypothesis")
            texts_i = tok.decode_tgt([h.tokens for h in hs])
            unmet = None if wanted is None else missing(texts_i[0], wanted[j])
            scores = [h.norm_score for h in hs]
            src = tok.src_pieces(ids[i])
            out[i] = Translation(texts_i[0], texts_i, scores, hs[0], src, None, unmet, lead)
    return out


def translate_through(
    model: NMTModel,
    passes: list[Tokenizer],
    texts: list[str],
    cfg: DecodeConfig,
    where: str = "input",
    **options: Any,
) -> list[Translation]:
    """`translate_texts` once per tokenizer of `passes` (`nmt.data.directions.route`): through
    a pivot, src -> pivot -> tgt with the same model, each pass reading the one before. The
    earlier passes decode as cfg says, on the same device and with the same progress bar, but
    keep only their best hypothesis; every other option (prefixes, constraints, attention) and
    cfg's nbest are the last pass's."""
    first = {k: v for k, v in options.items() if k in ("device", "progress")}
    via: Optional[list[str]] = None
    for tok in passes[:-1]:
        mid = translate_texts(model, tok, texts, replace(cfg, nbest=1), where=where, **first)
        via = texts = [t.text for t in mid]
        where = f"{where} (pivot text)"
    out = translate_texts(model, passes[-1], texts, cfg, where=where, **options)
    for t, text in zip(out, via or []):
        t.pivot = text
    return out


def check_pivot_options(
    pivot: Optional[str],
    alignment: Optional[bool] = False,
    constraints: Any = None,
    flags: bool = False,
) -> None:
    """What a pivot cannot give, refused in one place for the CLI (`flags`: named as
    --options), the API and the server: the last pass reads the pivot text, so its attention
    and its length limits are not the input's. `alignment` None: the caller has no such option
    (`nmt evaluate`), and the message names constraints only."""
    if pivot is None or not (alignment or constraints is not None):
        return
    dash = "--" if flags else ""
    offered = ["constraints"] if alignment is None else ["alignment", "constraints"]
    names = " and ".join(f"{dash}{name}" for name in offered)
    raise NmtError(f"{names} cannot be used with {dash}pivot")


def _constraint_groups(
    live: list[int], n: int, positive: Optional[Phrases], negative: Optional[Phrases]
) -> list[tuple[list[int], Optional[Phrases], Optional[Phrases]]]:
    """The lines to decode together: those without constraints (as if none were given: the
    constrained search has no greedy floor and runs beam search at beam 1), and those with."""
    if positive is None and negative is None:
        return [(live, None, None)] if live else []
    for kind, lists in (("positive", positive), ("negative", negative)):
        if lists is not None and len(lists) != n:
            raise NmtError(f"{len(lists)} {kind} constraint lists for {n} texts; expected one each")
    pos, neg = positive or [[]] * n, negative or [[]] * n
    held = [i for i in live if pos[i] or neg[i]]
    free = [i for i in live if not (pos[i] or neg[i])]
    groups = [(free, None, None)] if free else []
    if held:
        groups.append((held, [pos[i] for i in held], [neg[i] for i in held]))
    return groups


def encode_constraints(
    tok: Tokenizer,
    texts: list[str],
    constraints: list[LineConstraints],
    cfg: DecodeConfig,
    where: Callable[[int], str],
) -> tuple[Phrases, Phrases]:
    """Each text's phrases as target ids (must appear, must not), every one checked before any
    decoding; `where(i)` names text i's constraints in errors (FILE line N, a request field).
    A positive phrase may not be longer than its line's limit a * source tokens + b; every
    line is checked against decode.max_phrases and max_phrase_words first (`check_limits`)."""
    for i, c in enumerate(constraints):  # every line within the limits before any encoding
        check_limits(c, cfg, where(i))
    lengths = [min(len(s), cfg.max_input_tokens + 1) for s in tok.encode_src(texts)]
    positive: Phrases = []
    negative: Phrases = []
    for i, (text, c, n) in enumerate(zip(texts, constraints, lengths)):
        pos, neg = [], []
        if not c.empty:
            if not text.strip():
                raise NmtError(
                    f"{where(i)}: constraints for a blank input, which is not translated"
                )
            limit = int(cfg.max_len_a * n + cfg.max_len_b)
            pos, neg = encode_line(tok, c, limit, where(i), cfg)
        positive.append(pos)
        negative.append(neg)
    return positive, negative


def constraints_from_file(
    tok: Tokenizer, texts: list[str], path: str, cfg: DecodeConfig
) -> tuple[Phrases, Phrases]:
    """`--constraints FILE` of `nmt translate` and `nmt evaluate` for these texts, one line
    each: read, encoded and checked in full before decoding, errors naming FILE line N."""
    if cfg.sample:
        raise NmtError("--constraints needs beam search; it cannot be used with --sample")
    specs = read_constraints(path, len(texts))
    return encode_constraints(tok, texts, specs, cfg, lambda i: f"{path} line {i + 1}")


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
    normalised as beam search ranks it (GNMT penalty with decode.alpha), per-token log-probs.
    A target-mode direction view (`DirectionView`) puts its tag first in each
    reference, scored and counted in the length: beam search forces it the same way
    (`translate_texts`), so a hypothesis scores here what the search reported for it."""
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
