"""Decoding entry points: a batch through the right search, and lists of sentences through
length-sorted batches (the searches themselves are in `nmt.search`).

A sentence stops at EOS or at its own limit max_len = a * src_len + b; beam search ranks
finished hypotheses by the GNMT length-normalised score (`nmt.search.hypotheses`).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Sequence

import torch
from torch import Tensor
from tqdm import tqdm

from nmt.config import DecodeConfig
from nmt.data.batching import pad_batch
from nmt.errors import NmtError
from nmt.search.beam import beam_search
from nmt.search.constraints import Constraints, Phrases, check_constraints
from nmt.search.excluded_text import PieceText
from nmt.search.greedy import greedy_search
from nmt.search.hypotheses import Hypothesis, check_nbest
from nmt.search.rows import eval_mode, length_batches
from nmt.search.rules import Rules
from nmt.search.sampling import Sampler

if TYPE_CHECKING:
    from nmt.models.base import NMTModel

# Elements of the largest constraint tensor of one decoding batch (`_within_budget`): 2^22, a
# few tens of MB for its int64 and boolean temporaries at any beam and number of phrases.
CONSTRAINT_BUDGET = 1 << 22


def decode_settings(
    cfg: DecodeConfig, beam: Optional[int] = None, nbest: Optional[int] = None, name: str = "nbest"
) -> DecodeConfig:
    """`cfg` with a caller's beam and nbest, checked once by the n-best rule (`check_nbest`):
    where every front end (translate, evaluate, `Translator`, the server) fills its defaults.
    A beam of None is cfg's; an nbest of None is cfg's, at most the beam when searching. `name`
    is nbest as the caller's user spells it (--nbest, nbest). Neither given: cfg as it is."""
    if beam is None and nbest is None:
        return cfg
    beam = cfg.beam if beam is None else beam
    if nbest is None:
        nbest = cfg.nbest if cfg.sample else min(cfg.nbest, beam)
    check_nbest(beam, nbest, cfg.sample, name)
    return replace(cfg, beam=beam, nbest=nbest)


def decode_batch(
    model: "NMTModel",
    src: Tensor,
    src_mask: Tensor,
    cfg: DecodeConfig,
    beam: int | None = None,
    nbest: int | None = None,
    return_attn: bool = False,
    rules: Optional[Rules] = None,
    sampler: Optional[Sampler] = None,
    constraints: Optional[Constraints] = None,
) -> list[list[Hypothesis]]:
    """Greedy search for beam 1, beam search otherwise, nbest samples with a sampler; beam,
    nbest, alpha and length limits from cfg (`beam` and `nbest`, if given, replace cfg's: see
    `decode_settings`). With `constraints`, beam search for every beam (beam 1 too: greedy
    search cannot keep a phrase for later) and no greedy floor."""
    lengths = dict(
        max_len_a=cfg.max_len_a, max_len_b=cfg.max_len_b, alpha=cfg.alpha, return_attn=return_attn
    )
    if sampler is not None and constraints is not None:
        raise NmtError("constraints need beam search: sampling cannot honour them")
    cfg = decode_settings(cfg, beam, nbest)
    if sampler is not None:  # made from cfg.sample, so cfg.nbest is the number of samples
        n = cfg.nbest
        rows = torch.arange(src.size(0), device=src.device).repeat_interleave(n)
        with torch.inference_mode(), eval_mode(model):
            drawn = greedy_search(
                model,
                src[rows],
                src_mask[rows],
                **lengths,
                rules=(rules or Rules()).repeat(n),
                sampler=sampler,
            )
        return [[h for (h,) in drawn[i * n : (i + 1) * n]] for i in range(src.size(0))]
    with torch.inference_mode(), eval_mode(model):
        if cfg.beam == 1 and constraints is None:
            return greedy_search(model, src, src_mask, **lengths, rules=rules)
        beams = beam_search(
            model,
            src,
            src_mask,
            beam=cfg.beam,
            nbest=cfg.nbest,
            rules=rules,
            early_stop=cfg.early_stop,
            constraints=constraints,
            **lengths,
        )
        if not cfg.greedy_floor or constraints is not None:  # greedy's output ignores them
            return beams
        greedy = greedy_search(model, src, src_mask, **lengths, rules=rules)
    # Beam search is not exact: a greedy path pruned early can end better than every kept beam
    # (mostly when hypotheses run into the length limit). Offering the greedy hypothesis as one
    # more candidate costs a greedy pass (a fifth of beam 5's time) and guarantees beam >= greedy
    # in model score.
    return [_merge(hs, g, cfg.nbest) for hs, (g,) in zip(beams, greedy)]


def _merge(hyps: list[Hypothesis], extra: Hypothesis, nbest: int) -> list[Hypothesis]:
    if any(h.tokens == extra.tokens for h in hyps):
        return hyps
    return sorted(hyps + [extra], key=lambda h: -h.norm_score)[:nbest]


def translate_ids(
    model: "NMTModel",
    src_ids: list[list[int]],
    cfg: DecodeConfig,
    beam: int | None = None,
    nbest: int | None = None,
    return_attn: bool = False,
    device: str | torch.device = "cpu",
    progress: bool = False,
    prefixes: Optional[list[list[int]]] = None,
    positive_constraints: Optional[Phrases] = None,
    negative_constraints: Optional[Phrases] = None,
    word_joiners: Optional[Sequence[int]] = None,
    target_pieces: Optional[Sequence[str]] = None,
    masked: Optional[Tensor] = None,
) -> list[list[Hypothesis]]:
    """Decode source id lists (each ending with EOS) in length-sorted batches; input order out.
    cfg says how (`beam`, `nbest`: see `decode_settings`); samples are reproducible for the
    same seed, input and batch_tokens. `prefixes[i]` (target ids) starts line i's output;
    `positive_constraints[i]` must appear in it, as whole words given `word_joiners`
    (`Tokenizer.word_joiners`), and `negative_constraints[i]` must not, as text too given
    `target_pieces` (`nmt.search.constraints`); constrained batches are split further so that
    the search's constraint tensors stay under CONSTRAINT_BUDGET. No output holds a target id
    `masked` [V] marks (`nmt.data.language_pieces`) but those a line's prefix or positive
    phrases need."""
    _check_lines(model, src_ids, prefixes, positive_constraints, negative_constraints)
    cfg = decode_settings(cfg, beam, nbest)
    sampler = Sampler.from_config(cfg, device) if cfg.sample else None
    lengths = [len(s) for s in src_ids]
    order = sorted(range(len(src_ids)), key=lambda i: -lengths[i])  # longest first
    pieces = None if target_pieces is None else PieceText(target_pieces)
    results: list[list[Hypothesis]] = [[] for _ in src_ids]
    with (
        torch.inference_mode(),
        tqdm(
            total=len(src_ids), disable=not progress, file=sys.stderr, unit="sent", desc="decode"
        ) as bar,
    ):
        batches = length_batches(order, lengths, cfg.batch_tokens)
        for batch in _within_budget(batches, positive_constraints, cfg.beam):
            src, mask = pad_batch([src_ids[i] for i in batch], model.pad_id)
            src, mask = src.to(device), mask.to(device)
            vocab = _masks(masked, _rows(positive_constraints, batch), device)
            rules = Rules.build(_rows(prefixes, batch), cfg.no_repeat_ngram, device, vocab)
            given = (positive_constraints, negative_constraints, word_joiners, pieces)
            cons = _constraints(model, batch, *given, device)
            hyps = decode_batch(
                model,
                src,
                mask,
                cfg,
                return_attn=return_attn,
                rules=rules,
                sampler=sampler,
                constraints=cons,
            )
            for i, h in zip(batch, hyps):
                results[i] = h
            bar.update(len(batch))
    return results


def _check_lines(
    model: "NMTModel",
    src_ids: list[list[int]],
    prefixes: Optional[list[list[int]]],
    positive: Optional[Phrases],
    negative: Optional[Phrases],
) -> None:
    """translate_ids' inputs, before any decoding: no empty source, one prefix and one list of
    constraints of each kind given per line, well-formed constraints."""
    for i, s in enumerate(src_ids):
        if not s:
            raise NmtError(f"source sentence {i} is empty; expected at least the EOS token")
    if prefixes is not None and len(prefixes) != len(src_ids):
        raise NmtError(
            f"{len(prefixes)} prefixes for {len(src_ids)} sentences; expected one "
            f"prefix line per input line"
        )
    for kind, lists in (("positive", positive), ("negative", negative)):
        if lists is not None and len(lists) != len(src_ids):
            raise NmtError(
                f"{len(lists)} {kind} constraint lists for {len(src_ids)} sentences; expected "
                f"one list (maybe empty) per input line"
            )
    if positive is not None or negative is not None:
        check_constraints(positive, negative, (model.pad_id, model.bos_id, model.eos_id))


def _within_budget(
    batches: Iterable[list[int]], positive: Optional[Phrases], beam: int
) -> Iterator[list[int]]:
    """The batches, those with positive phrases cut into parts whose constraint tensors (b
    sentences x M = 3K + 2KC candidates x C phrases x L tokens, `nmt.search.constraints`) hold
    at most CONSTRAINT_BUDGET elements: memory bounded by design, whatever the batch's length
    mix (a batch of a thousand short constrained sentences would otherwise hold gigabytes)."""
    for batch in batches:
        phrases = [] if positive is None else [positive[i] for i in batch]
        C = max((len(ps) for ps in phrases), default=0)
        if not C:
            yield batch
            continue
        L = max(len(p) for ps in phrases for p in ps)
        rows = max(1, CONSTRAINT_BUDGET // ((3 * beam + 2 * beam * C) * C * L))
        for at in range(0, len(batch), rows):
            yield batch[at : at + rows]


def _masks(
    masked: Optional[Tensor], positive: Optional[Phrases], device: str | torch.device
) -> Optional[Tensor]:
    """The batch's mask of target ids no output may hold: `masked` [V] itself, or with positive
    phrases [B, V] rows without the ids of their own line's phrases (a phrase the user asks
    for wins over the mask); None without a mask."""
    if masked is None:
        return None
    if not positive or not any(positive):
        return masked.to(device)
    rows = masked.repeat(len(positive), 1)
    for row, line in zip(rows, positive):
        row[[i for phrase in line for i in phrase]] = False
    return rows.to(device)


def _rows(per_line: Optional[list], batch: list[int]) -> Optional[list]:
    """The entries of the batch's lines, or None."""
    return None if per_line is None else [per_line[i] for i in batch]


def _constraints(
    model: "NMTModel",
    batch: list[int],
    positive: Optional[Phrases],
    negative: Optional[Phrases],
    joiners: Optional[Sequence[int]],
    pieces: Optional[PieceText],
    device: str | torch.device,
) -> Optional[Constraints]:
    """The batch's lines' constraints, or None when there are none of either kind."""
    if positive is None and negative is None:
        return None
    reserved = (model.pad_id, model.bos_id, model.eos_id)
    rows = _rows(positive, batch), _rows(negative, batch)
    return Constraints.build(*rows, device, reserved, joiners, pieces)
