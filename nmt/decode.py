"""Greedy and batched beam search, written once against the NMTModel interface.

Both searches decode a whole batch in lock-step: one `encode`, then one `decode_step` per output
position for every sentence still running. A sentence stops at EOS or at its own limit
max_len = a * src_len + b (src_len counts the real source tokens, EOS included): a hypothesis
holds at most max_len tokens before its EOS, which is forced at that point. Finished sentences
stop contributing: their rows are masked, and once a quarter of the batch is done they are
dropped from the decoder state with `State.select`.

Scores are sums of model log-probs including the EOS. Beam search ranks finished hypotheses
by score / lp(len) with the GNMT length penalty lp = ((5 + len) / 6) ** alpha, len counting the
EOS (Wu et al. 2016). PAD and BOS are never generated.

`Rules` constrain both searches the same way, step by step: a forced target prefix per sentence
(the limit grows to fit it) and a ban on repeated n-grams. Sampling is greedy search drawing each
token from the (tempered, top-k/top-p filtered) distribution; its scores stay the model's own
log-probs. `force_decode` scores given targets through the same interface.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm import tqdm

from nmt.config import DecodeConfig
from nmt.data.batching import pad_batch
from nmt.errors import NmtError

if TYPE_CHECKING:
    from nmt.models.base import NMTModel, State

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    tokens: list[int]  # output ids, without BOS and without the final EOS
    score: float  # sum of token log-probs including the EOS (no length penalty)
    norm_score: float  # ranking score: score / lp(len(tokens) + 1)
    attn: Optional[Tensor]  # [len(tokens) + 1, S_real] alignment over the real source, or None


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT length penalty ((5 + len) / 6) ** alpha; 1 when alpha is 0."""
    return ((5.0 + length) / 6.0) ** alpha


def max_lengths(src_mask: Tensor, a: float, b: int) -> Tensor:
    """Per-sentence output limit floor(a * src_len + b), src_len = real source tokens."""
    return (a * src_mask.sum(1).double() + b).long()


# ----------------------------------------------------------------------------------------------
# Shared step helpers


def _restrict(log_probs: Tensor, at_limit: Optional[Tensor], model: "NMTModel") -> Tensor:
    """Ban PAD and BOS everywhere; rows at their length limit (at_limit, None when no row can
    be) may only emit EOS. In place: decode_step's log-probs are the search's to overwrite (a
    copy of [rows, vocab] per step was a tenth of beam search's time)."""
    banned = torch.tensor([model.pad_id, model.bos_id], device=log_probs.device)
    out = log_probs.index_fill_(1, banned, NEG_INF)
    if at_limit is not None:
        not_eos = torch.arange(log_probs.size(-1), device=log_probs.device) != model.eos_id
        out.masked_fill_(at_limit.unsqueeze(-1) & not_eos, NEG_INF)
    return out


@dataclass
class Rules:
    """Per-step constraints shared by greedy, beam and sampling, for a batch of B sentences."""

    prefix: Optional[Tensor] = None  # [B, P] forced first target ids (PAD after the end)
    prefix_len: Optional[Tensor] = None  # [B]
    no_repeat_ngram: int = 0

    @classmethod
    def build(
        cls,
        prefixes: Optional[list[list[int]]],
        no_repeat_ngram: int = 0,
        device: str | torch.device = "cpu",
    ) -> "Rules":
        if not prefixes:
            return cls(no_repeat_ngram=no_repeat_ngram)
        prefix, mask = pad_batch(prefixes)
        return cls(prefix.to(device), mask.sum(1).to(device), no_repeat_ngram)

    def repeat(self, n: int) -> "Rules":
        """The rules of every sentence repeated n times in a row (samples of one sentence)."""
        if self.prefix is None:
            return self
        return Rules(
            self.prefix.repeat_interleave(n, 0),
            self.prefix_len.repeat_interleave(n),
            self.no_repeat_ngram,
        )

    def limit(self, limit: Tensor) -> Tensor:
        """Length limits grown so that every prefix fits before its EOS."""
        return limit if self.prefix_len is None else torch.maximum(limit, self.prefix_len)

    def apply(self, log_probs: Tensor, t: int, hist: Tensor, sent: Tensor) -> Tensor:
        """log_probs [R, V] of rows whose sentences are `sent` [R], history hist [R, t]."""
        out = (
            _ban_repeats(log_probs, hist, self.no_repeat_ngram)
            if self.no_repeat_ngram
            else log_probs
        )
        if self.prefix is not None and t < self.prefix.size(1):
            # Inside its prefix a row may emit only the forced token, at its model log-prob
            # (even if it repeats an n-gram: the user asked for it).
            forced = self.prefix[sent, t].unsqueeze(1)
            only = torch.full_like(log_probs, NEG_INF).scatter(
                1, forced, log_probs.gather(1, forced)
            )
            out = torch.where((t < self.prefix_len[sent]).unsqueeze(1), only, out)
        return out


def _ban_repeats(log_probs: Tensor, hist: Tensor, n: int) -> Tensor:
    """Ban every token that would complete an n-gram already in the row's history."""
    if n == 1:
        banned = hist
    else:
        if hist.size(1) < n:
            return log_probs
        grams = hist.unfold(1, n, 1)  # [R, W, n]
        match = (grams[:, :, :-1] == hist[:, -(n - 1) :].unsqueeze(1)).all(-1)
        banned = grams[:, :, -1].masked_fill(~match, -1)
    if banned.numel() == 0:
        return log_probs
    hit = torch.zeros(
        log_probs.shape[0], log_probs.shape[1] + 1, dtype=torch.bool, device=log_probs.device
    )
    hit.scatter_(1, banned.masked_fill(banned < 0, log_probs.size(1)), True)
    return log_probs.masked_fill(hit[:, :-1], NEG_INF)


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


def _allowed(
    model: "NMTModel",
    log_probs: Tensor,
    t: int,
    limit: Tensor,
    shortest: int,
    rules: "Rules",
    hist: Tensor,
    sent: Tensor,
) -> Tensor:
    """Step t's fp32 log-probs [R, V] with everything the limits and rules forbid at -inf (in
    place when they are fp32 already; the caller may change them further). `shortest` is the
    smallest limit of the batch, so that steps before it skip the at-limit mask."""
    at_limit = limit <= t if t >= shortest else None
    return rules.apply(_restrict(log_probs.float(), at_limit, model), t, hist, sent)


def _reorder(state: "State", index: Tensor) -> "State":
    """Beam search's per-step select, whose index only moves rows between the beams of one
    sentence: a state that knows what that spares (the transformer's) does less work."""
    reorder = getattr(state, "reorder", None)
    return state.select(index) if reorder is None else reorder(index)


def _expand(state: "State", B: int, K: int, device: torch.device) -> "State":
    """The B sentences' states repeated for their K beams (rows sentence * K + beam): a state
    that can share what is the same for every beam (the transformer's cross-attention) does."""
    expand = getattr(state, "expand_beams", None)
    if expand is not None:
        return expand(K)
    return state.select(torch.arange(B, device=device).repeat_interleave(K))


def _take(x: Tensor, index: Tensor) -> Tensor:
    """x [b, K, ...], index [b, M] -> [b, M, ...]: per-sentence gather along the beam axis."""
    return x[torch.arange(x.size(0), device=x.device).unsqueeze(1), index]


def _beam_rows(sent: Tensor, beam: Tensor | int) -> Tensor:
    """Flat decoder-state rows of (sentence, beam) pairs: sent [b] x beam [b, K] or an int K."""
    if isinstance(beam, int):
        beam = torch.arange(beam, device=sent.device).expand(sent.numel(), beam)
    return (sent.unsqueeze(1) * beam.size(1) + beam).reshape(-1)


def _should_compact(done: Tensor) -> tuple[bool, bool]:
    """(all done, worth dropping the done rows): the one host sync per step."""
    n_done = int(done.sum())
    return n_done == done.numel(), 4 * n_done >= done.numel() and n_done > 0


def _hypotheses(
    tokens: Tensor,
    score: Tensor,
    norm: Tensor,
    length: Tensor,
    attn: Optional[Tensor],
    src_mask: Tensor,
    nbest: int,
) -> list[list[Hypothesis]]:
    """Device buffers [B, N, ...] (best first, -inf norm = empty slot) -> Python hypotheses.

    One transfer per buffer; attention keeps the steps incl. EOS and the real source columns."""
    tokens, score, norm, length = (x.cpu().tolist() for x in (tokens, score, norm, length))
    attn, mask = (None if attn is None else attn.cpu()), src_mask.cpu()
    out = []
    for i in range(len(tokens)):
        out.append(
            [
                Hypothesis(
                    tokens[i][k][: length[i][k] - 1],
                    score[i][k],
                    norm[i][k],
                    None if attn is None else attn[i, k, : length[i][k], mask[i]],
                )
                for k in range(nbest)
                if norm[i][k] != NEG_INF
            ]
        )
    return out


# ----------------------------------------------------------------------------------------------
# Greedy search


@torch.inference_mode()
def greedy_search(
    model: "NMTModel",
    src: Tensor,
    src_mask: Tensor,
    *,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    alpha: float = 0.0,
    return_attn: bool = False,
    rules: Optional[Rules] = None,
    sampler: Optional[Sampler] = None,
) -> list[list[Hypothesis]]:
    """Pick the most probable token at every step (or draw it with `sampler`).

    `alpha` only sets the reported norm_score."""
    B, S = src.shape
    dev = src.device
    rules = rules or Rules()
    limit = rules.limit(max_lengths(src_mask, max_len_a, max_len_b))
    steps, shortest = int(limit.max()) + 1, int(limit.min())  # + 1 for the EOS
    out_tok = torch.full((B, steps), model.pad_id, dtype=torch.long, device=dev)
    out_score = torch.zeros(B, device=dev)
    out_len = torch.zeros(B, dtype=torch.long, device=dev)
    out_attn: Optional[Tensor] = torch.zeros(B, steps, S, device=dev) if return_attn else None

    state = model.init_state(model.encode(src, src_mask))
    ids = torch.arange(B, device=dev)  # active row -> sentence
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    prev = torch.full((B,), model.bos_id, dtype=torch.long, device=dev)
    for t in range(steps):
        log_probs, state, attn = model.decode_step(state, prev)
        hist = out_tok[ids, :t] if rules.no_repeat_ngram else out_tok[:0, :t]  # only n-grams
        log_probs = _allowed(model, log_probs, t, limit[ids], shortest, rules, hist, ids)
        if sampler is None:
            tok_lp, tok = log_probs.max(-1)
        else:
            tok = sampler.pick(log_probs)
            tok_lp = log_probs.gather(1, tok.unsqueeze(1)).squeeze(1)
        tok = tok.masked_fill(done, model.pad_id)
        out_tok[ids, t] = tok
        out_score.index_add_(0, ids, tok_lp.masked_fill(done, 0.0))
        out_len.index_add_(0, ids, (~done).long())
        if out_attn is not None and attn is not None:
            out_attn[ids, t] = attn.float()
        done = done | (tok == model.eos_id)
        prev = tok
        all_done, compact = _should_compact(done)
        if all_done:
            break
        if compact:
            keep = (~done).nonzero().squeeze(1)
            ids, done, prev, state = ids[keep], done[keep], prev[keep], state.select(keep)

    if attn is None:  # a model without attention
        out_attn = None
    norm = out_score / length_penalty(out_len, alpha)
    one = (x.unsqueeze(1) for x in (out_tok, out_score, norm, out_len))
    return _hypotheses(*one, None if out_attn is None else out_attn.unsqueeze(1), src_mask, 1)


# ----------------------------------------------------------------------------------------------
# Beam search


class _Finished:
    """The K best ended hypotheses of every sentence, kept on the device sorted by norm score."""

    def __init__(
        self, B: int, K: int, steps: int, S: int, with_attn: bool, pad: int, device: torch.device
    ) -> None:
        self.K, self.steps, self.pad = K, steps, pad
        self.norm = torch.full((B, K), NEG_INF, device=device)
        self.score = torch.zeros(B, K, device=device)
        self.length = torch.zeros(B, K, dtype=torch.long, device=device)
        self.tokens = torch.full((B, K, steps), pad, dtype=torch.long, device=device)
        self.attn = torch.zeros(B, K, steps, S, device=device) if with_attn else None

    def add_ended(
        self,
        ids: Tensor,
        done: Tensor,
        is_eos: Tensor,
        top: Tensor,
        cand: Tensor,
        cand_attn: Optional[Tensor],
        alpha: float,
    ) -> None:
        """Merge the candidates among the K best of a step [b, 2K] that end there (EOS, finite
        score, sentence not done) into sentences `ids`."""
        K = self.K
        ended = is_eos[:, :K] & torch.isfinite(top[:, :K]) & ~done.unsqueeze(1)
        self._add(
            ids,
            ended,
            top[:, :K],
            cand[:, :K],
            None if cand_attn is None else cand_attn[:, :K],
            alpha,
        )

    def _add(
        self,
        ids: Tensor,
        ended: Tensor,
        score: Tensor,
        tokens: Tensor,
        attn: Optional[Tensor],
        alpha: float,
    ) -> None:
        """Merge the `ended` candidates [b, K] (length tokens.size(2)) into sentences `ids`."""
        length = tokens.size(2)
        norm = torch.where(ended, score / length_penalty(length, alpha), NEG_INF)
        best = torch.cat([self.norm[ids], norm], 1).topk(self.K, dim=1).indices

        def merge(old: Tensor, new: Tensor) -> Tensor:
            return _take(torch.cat([old[ids], new], 1), best)

        room = self.steps - length  # pad candidates to the buffer length
        self.norm[ids] = merge(self.norm, norm)
        self.score[ids] = merge(self.score, score)
        self.length[ids] = merge(self.length, torch.full_like(self.length[ids], length))
        self.tokens[ids] = merge(self.tokens, F.pad(tokens, (0, room), value=self.pad))
        if self.attn is not None and attn is not None:
            self.attn[ids] = merge(self.attn, F.pad(attn, (0, 0, 0, room)))

    def count(self, ids: Tensor) -> Tensor:
        return torch.isfinite(self.norm[ids]).sum(1)

    def hypotheses(self, src_mask: Tensor, nbest: int) -> list[list[Hypothesis]]:
        return _hypotheses(
            self.tokens, self.score, self.norm, self.length, self.attn, src_mask, nbest
        )


def _beam_size(beam: int, nbest: int) -> int:
    if beam < 1 or not 1 <= nbest <= beam:
        raise NmtError(f"beam search needs 1 <= nbest <= beam, got beam={beam}, nbest={nbest}")
    return beam


def _done(
    done: Tensor,
    fin: "_Finished",
    ids: Tensor,
    t: int,
    limit: Tensor,
    best_live: Tensor,
    nbest: int,
    alpha: float,
    early_stop: bool,
) -> Tensor:
    """Which active sentences `ids` are done after step t: those done before, those holding K
    finished hypotheses or at their limit and, with early_stop, those whose nbest finished
    hypotheses rank at or above their best live beam (score `best_live`) were it to end at the
    next step. A live beam only loses score as it grows, so with alpha 0 no later step can
    change that; with alpha > 0 a longer ending divides by a larger penalty, and this is the
    usual approximation (CTranslate2 and HF stop when the top beam ends)."""
    done = done | (fin.count(ids) >= fin.K) | (t >= limit[ids])
    if not early_stop:
        return done
    finished = fin.norm[ids, nbest - 1]
    ahead = finished >= best_live / length_penalty(t + 2, alpha)  # t + 1 tokens and an EOS
    return done | (torch.isfinite(finished) & ahead)


def _candidates(
    log_probs: Tensor,
    scores: Tensor,
    hist: Tensor,
    hist_attn: Optional[Tensor],
    attn: Optional[Tensor],
) -> tuple[Tensor, Tensor, Tensor, Tensor, Optional[Tensor]]:
    """The 2K best continuations of each sentence's K live beams (even if K of them end here, K
    live ones remain): their scores, tokens, the beam each extends, and the extended token
    histories [b, 2K, t+1] (and attention histories [b, 2K, t+1, S])."""
    (b, K), V = scores.shape, log_probs.size(-1)
    total = log_probs.view(b, K, V).add_(scores.unsqueeze(-1))
    top, idx = total.view(b, K * V).topk(2 * K, 1)
    origin, tok = idx // V, idx % V
    cand = torch.cat([_take(hist, origin), tok.unsqueeze(2)], 2)
    if hist_attn is None or attn is None:
        return top, tok, origin, cand, None
    step_attn = _take(attn.float().view(b, K, -1), origin).unsqueeze(2)
    return top, tok, origin, cand, torch.cat([_take(hist_attn, origin), step_attn], 2)


@torch.inference_mode()
def beam_search(
    model: "NMTModel",
    src: Tensor,
    src_mask: Tensor,
    *,
    beam: int = 5,
    alpha: float = 0.6,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    nbest: int = 1,
    return_attn: bool = False,
    rules: Optional[Rules] = None,
    early_stop: bool = True,
) -> list[list[Hypothesis]]:
    """Batched beam search: batch * beam decoder rows, top-k over beam * V candidates per step.

    A sentence is done once it holds `beam` finished hypotheses (ended inside the top `beam`
    candidates of a step) or reaches its length limit, where every live beam is ended. With
    `early_stop` it is also done once it holds `nbest` finished hypotheses that all rank above
    its best live beam, were that beam to end at the next step (`_done`)."""
    (B, S), K, dev, rules = src.shape, _beam_size(beam, nbest), src.device, rules or Rules()
    limit = rules.limit(max_lengths(src_mask, max_len_a, max_len_b))
    steps, shortest = int(limit.max()) + 1, int(limit.min())
    fin = _Finished(B, K, steps, S, return_attn, model.pad_id, dev)

    ids = torch.arange(B, device=dev)  # active sentence -> batch sentence
    state = _expand(model.init_state(model.encode(src, src_mask)), B, K, dev)
    done, scores = torch.zeros(B, dtype=torch.bool, device=dev), torch.zeros(B, K, device=dev)
    scores[:, 1:] = NEG_INF  # one live beam at first: no duplicates
    hist = torch.zeros(B, K, 0, dtype=torch.long, device=dev)
    hist_attn = torch.zeros(B, K, 0, S, device=dev) if return_attn else None
    prev = torch.full((B * K,), model.bos_id, dtype=torch.long, device=dev)
    for t in range(steps):
        log_probs, state, attn = model.decode_step(state, prev)
        if attn is None:  # a model without attention
            hist_attn = fin.attn = None
        b, rows = ids.numel(), ids.repeat_interleave(K)
        log_probs = _allowed(
            model, log_probs, t, limit[rows], shortest, rules, hist.flatten(0, 1), rows
        )
        top, tok, origin, cand, cand_attn = _candidates(log_probs, scores, hist, hist_attn, attn)
        is_eos = tok == model.eos_id
        fin.add_ended(ids, done, is_eos, top, cand, cand_attn, alpha)
        # The K best candidates that did not end stay live (stable order: best first).
        live = (torch.arange(2 * K, device=dev) + 2 * K * is_eos.long()).topk(K, 1, False).indices
        scores, prev = top.gather(1, live), tok.gather(1, live).reshape(-1)
        hist = _take(cand, live)
        hist_attn = None if cand_attn is None else _take(cand_attn, live)
        state = _reorder(state, _beam_rows(torch.arange(b, device=dev), origin.gather(1, live)))
        done = _done(done, fin, ids, t, limit, scores[:, 0], nbest, alpha, early_stop)
        all_done, compact = _should_compact(done)
        if all_done:
            break
        if compact:
            keep = (~done).nonzero().squeeze(1)
            ids, done, scores, hist = ids[keep], done[keep], scores[keep], hist[keep]
            hist_attn = None if hist_attn is None else hist_attn[keep]
            prev, state = prev.view(b, K)[keep].reshape(-1), state.select(_beam_rows(keep, K))
    return fin.hypotheses(src_mask, nbest)


# ----------------------------------------------------------------------------------------------
# Entry points


@contextmanager
def _eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Decode without dropout, then restore the caller's train/eval mode."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


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
) -> list[list[Hypothesis]]:
    """Greedy search for beam 1, beam search otherwise, `nbest` samples with a sampler;
    alpha and length limits from cfg."""
    lengths = dict(
        max_len_a=cfg.max_len_a, max_len_b=cfg.max_len_b, alpha=cfg.alpha, return_attn=return_attn
    )
    if sampler is not None:
        n = cfg.nbest if nbest is None else nbest
        rows = torch.arange(src.size(0), device=src.device).repeat_interleave(n)
        with torch.inference_mode(), _eval_mode(model):
            drawn = greedy_search(
                model,
                src[rows],
                src_mask[rows],
                **lengths,
                rules=(rules or Rules()).repeat(n),
                sampler=sampler,
            )
        return [[h for (h,) in drawn[i * n : (i + 1) * n]] for i in range(src.size(0))]
    beam = cfg.beam if beam is None else beam
    nbest = min(cfg.nbest, beam) if nbest is None else nbest
    if beam < 1 or not 1 <= nbest <= beam:
        raise NmtError(f"decoding needs 1 <= nbest <= beam, got beam={beam}, nbest={nbest}")
    with torch.inference_mode(), _eval_mode(model):
        if beam == 1:
            return greedy_search(model, src, src_mask, **lengths, rules=rules)
        beams = beam_search(
            model,
            src,
            src_mask,
            beam=beam,
            nbest=nbest,
            rules=rules,
            early_stop=cfg.early_stop,
            **lengths,
        )
        if not cfg.greedy_floor:
            return beams
        greedy = greedy_search(model, src, src_mask, **lengths, rules=rules)
    # Beam search is not exact: a greedy path pruned early can end better than every kept beam
    # (mostly when hypotheses run into the length limit). Offering the greedy hypothesis as one
    # more candidate costs a greedy pass (a fifth of beam 5's time) and guarantees beam >= greedy
    # in model score.
    return [_merge(hs, g, nbest) for hs, (g,) in zip(beams, greedy)]


def _merge(hyps: list[Hypothesis], extra: Hypothesis, nbest: int) -> list[Hypothesis]:
    if any(h.tokens == extra.tokens for h in hyps):
        return hyps
    return sorted(hyps + [extra], key=lambda h: -h.norm_score)[:nbest]


def _batches(order: list[int], lengths: list[int], budget: int) -> Iterator[list[int]]:
    """Cut `order` (longest first) into batches of at most `budget` padded source tokens."""
    batch: list[int] = []
    for i in order:
        if batch and (len(batch) + 1) * lengths[batch[0]] > budget:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


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
) -> list[list[Hypothesis]]:
    """Decode source id lists (each ending with EOS) in length-sorted batches; input order out.

    `prefixes[i]` (target ids, no EOS) starts sentence i's output; cfg.sample draws cfg.nbest
    samples per sentence, reproducibly for the same seed, input and batch_tokens."""
    for i, s in enumerate(src_ids):
        if not s:
            raise NmtError(f"source sentence {i} is empty; expected at least the EOS token")
    if prefixes is not None and len(prefixes) != len(src_ids):
        raise NmtError(
            f"{len(prefixes)} prefixes for {len(src_ids)} sentences; expected one "
            f"prefix line per input line"
        )
    sampler = Sampler.from_config(cfg, device) if cfg.sample else None
    lengths = [len(s) for s in src_ids]
    order = sorted(range(len(src_ids)), key=lambda i: -lengths[i])  # longest first
    results: list[list[Hypothesis]] = [[] for _ in src_ids]
    with (
        torch.inference_mode(),
        tqdm(
            total=len(src_ids), disable=not progress, file=sys.stderr, unit="sent", desc="decode"
        ) as bar,
    ):
        for batch in _batches(order, lengths, cfg.batch_tokens):
            src, mask = pad_batch([src_ids[i] for i in batch], model.pad_id)
            src, mask = src.to(device), mask.to(device)
            rules = Rules.build(
                None if prefixes is None else [prefixes[i] for i in batch],
                cfg.no_repeat_ngram,
                device,
            )
            for i, hyps in zip(
                batch, decode_batch(model, src, mask, cfg, beam, nbest, return_attn, rules, sampler)
            ):
                results[i] = hyps
            bar.update(len(batch))
    return results


# ----------------------------------------------------------------------------------------------
# Forced decoding (scoring given targets)


@torch.inference_mode()
def force_decode(
    model: "NMTModel", src: Tensor, src_mask: Tensor, tgt: list[list[int]]
) -> list[list[float]]:
    """Log-prob of each token of each target (ids without EOS), the final EOS included."""
    out_ids, out_mask = pad_batch([t + [model.eos_id] for t in tgt], model.pad_id)
    out_ids, out_mask = out_ids.to(src.device), out_mask.to(src.device)
    prev = torch.full((src.size(0),), model.bos_id, dtype=torch.long, device=src.device)
    with _eval_mode(model):
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
    for batch in _batches(order, lengths, cfg.batch_tokens):
        src, mask = pad_batch([src_ids[i] for i in batch], model.pad_id)
        for i, lp in zip(
            batch, force_decode(model, src.to(device), mask.to(device), [tgt_ids[i] for i in batch])
        ):
            results[i] = lp
    return results
