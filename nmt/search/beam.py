"""Batched beam search: batch * beam decoder rows, top-k over beam * V candidates per step."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.search.constraints import Constraints, Tracker
from nmt.search.hypotheses import (
    NEG_INF,
    Hypothesis,
    check_nbest,
    collect,
    length_penalty,
    max_lengths,
)
from nmt.search.rows import beam_rows, expand, reorder, should_compact, take
from nmt.search.rules import Rules, allowed
from nmt.search.top_k import row_topk

if TYPE_CHECKING:
    from nmt.models.base import NMTModel, State


class _Finished:
    """The K best ended hypotheses of every sentence, kept on the device sorted by norm score
    (under constraints: by how many positive phrases they miss, then by norm score)."""

    def __init__(
        self,
        B: int,
        K: int,
        steps: int,
        S: int,
        with_attn: bool,
        pad: int,
        device: torch.device,
        constrained: bool = False,
    ) -> None:
        self.K, self.steps, self.pad = K, steps, pad
        self.norm = torch.full((B, K), NEG_INF, device=device)
        self.score = torch.zeros(B, K, device=device)
        self.length = torch.zeros(B, K, dtype=torch.long, device=device)
        self.tokens = torch.full((B, K, steps), pad, dtype=torch.long, device=device)
        self.attn = torch.zeros(B, K, steps, S, device=device) if with_attn else None
        self.unmet = torch.zeros(B, K, dtype=torch.long, device=device) if constrained else None

    def add_ended(
        self,
        ids: Tensor,
        done: Tensor,
        is_eos: Tensor,
        top: Tensor,
        cand: Tensor,
        cand_attn: Optional[Tensor],
        alpha: float,
        track: Optional[Tracker] = None,
    ) -> None:
        """Merge the candidates among the K best of a step [b, 2K] that end there (EOS, finite
        score, sentence not done) into sentences `ids` (with the phrases each misses, under
        constraints)."""
        K = self.K
        ended = is_eos[:, :K] & torch.isfinite(top[:, :K]) & ~done.unsqueeze(1)
        self._add(
            ids,
            ended,
            top[:, :K],
            cand[:, :K],
            None if cand_attn is None else cand_attn[:, :K],
            alpha,
            None if track is None else track.unmet(K),
        )

    def _add(
        self,
        ids: Tensor,
        ended: Tensor,
        score: Tensor,
        tokens: Tensor,
        attn: Optional[Tensor],
        alpha: float,
        unmet: Optional[Tensor] = None,
    ) -> None:
        """Merge the `ended` candidates [b, K] (length tokens.size(2)) into sentences `ids`."""
        length = tokens.size(2)
        norm = torch.where(ended, score / length_penalty(length, alpha), NEG_INF)
        if self.unmet is None:
            best = torch.cat([self.norm[ids], norm], 1).topk(self.K, dim=1).indices
        else:  # fewer phrases missed first (float64: the offset keeps every float32 norm apart)
            key = torch.cat([self.norm[ids], norm], 1).double()
            key -= 1e6 * torch.cat([self.unmet[ids], unmet], 1).double()
            best = key.topk(self.K, dim=1).indices

        def merge(old: Tensor, new: Tensor) -> Tensor:
            return take(torch.cat([old[ids], new], 1), best)

        room = self.steps - length  # pad candidates to the buffer length
        self.norm[ids] = merge(self.norm, norm)
        self.score[ids] = merge(self.score, score)
        self.length[ids] = merge(self.length, torch.full_like(self.length[ids], length))
        self.tokens[ids] = merge(self.tokens, F.pad(tokens, (0, room), value=self.pad))
        if self.attn is not None and attn is not None:
            self.attn[ids] = merge(self.attn, F.pad(attn, (0, 0, 0, room)))
        if self.unmet is not None:
            self.unmet[ids] = merge(self.unmet, unmet)

    def count(self, ids: Tensor) -> Tensor:
        return torch.isfinite(self.norm[ids]).sum(1)

    def hypotheses(self, src_mask: Tensor, nbest: int) -> list[list[Hypothesis]]:
        return collect(
            self.tokens, self.score, self.norm, self.length, self.attn, src_mask, nbest, self.unmet
        )


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
    top, idx = row_topk(total.view(b, K * V), 2 * K)
    origin, tok = idx // V, idx % V
    return (top, tok, origin, *_extend(hist, hist_attn, attn, origin, tok))


def _step_candidates(
    track: Optional[Tracker],
    log_probs: Tensor,
    scores: Tensor,
    hist: Tensor,
    hist_attn: Optional[Tensor],
    attn: Optional[Tensor],
    t: int,
    limit: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Optional[Tensor]]:
    """`_candidates`, or under constraints (`track`) the 2K candidates that fill the beam by
    dynamic beam allocation, in that order, after the masks of EOS and of negative phrases."""
    if track is None:
        return _candidates(log_probs, scores, hist, hist_attn, attn)
    log_probs = track.mask(log_probs, hist, t, limit <= t)
    if not track.positive:
        return _candidates(log_probs, scores, hist, hist_attn, attn)
    b, K = scores.shape
    total = log_probs.view(b, K, -1).add_(scores.unsqueeze(-1))
    top, tok, origin = track.candidates(total, hist, t, limit.view(b, K)[:, 0])
    return (top, tok, origin, *_extend(hist, hist_attn, attn, origin, tok))


def _extend(
    hist: Tensor, hist_attn: Optional[Tensor], attn: Optional[Tensor], origin: Tensor, tok: Tensor
) -> tuple[Tensor, Optional[Tensor]]:
    """Candidates' histories [b, M, t+1] (and attention [b, M, t+1, S]): those of the beams
    `origin` [b, M] they extend, then their tokens `tok` (and that step's attention)."""
    b, K = hist.shape[:2]
    cand = torch.cat([take(hist, origin), tok.unsqueeze(2)], 2)
    if hist_attn is None or attn is None:
        return cand, None
    step_attn = take(attn.float().view(b, K, -1), origin).unsqueeze(2)
    return cand, torch.cat([take(hist_attn, origin), step_attn], 2)


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
    constraints: Optional[Constraints] = None,
) -> list[list[Hypothesis]]:
    """Batched beam search: batch * beam decoder rows, top-k over beam * V candidates per step.

    A sentence is done once it holds `beam` finished hypotheses (ended inside the top `beam`
    candidates of a step) or reaches its length limit, where every live beam is ended. With
    `early_stop` it is also done once it holds `nbest` finished hypotheses that all rank above
    its best live beam, were that beam to end at the next step (`_done`). `constraints`: dynamic
    beam allocation over lexical constraints (`nmt.search.constraints`)."""
    check_nbest(beam, nbest)
    (B, S), K, dev, rules = src.shape, beam, src.device, rules or Rules()
    limit = rules.limit(max_lengths(src_mask, max_len_a, max_len_b))
    steps, shortest = int(limit.max()) + 1, int(limit.min())
    track = None if constraints is None else Tracker(constraints, K, model.eos_id, rules.prefix_len)
    fin = _Finished(B, K, steps, S, return_attn, model.pad_id, dev, track is not None)
    ids, state, done, scores, hist, hist_attn, prev = _start(model, src, src_mask, K, return_attn)
    for t in range(steps):
        log_probs, state, attn = model.decode_step(state, prev)
        if attn is None:  # a model without attention
            hist_attn = fin.attn = None
        b, rows = ids.numel(), ids.repeat_interleave(K)
        log_probs = allowed(
            model, log_probs, t, limit[rows], shortest, rules, hist.flatten(0, 1), rows
        )
        top, tok, origin, cand, cand_attn = _step_candidates(
            track, log_probs, scores, hist, hist_attn, attn, t, limit[rows]
        )
        is_eos = tok == model.eos_id
        fin.add_ended(ids, done, is_eos, top, cand, cand_attn, alpha, track)
        # The K best candidates that did not end stay live (stable order: best first).
        live = (torch.arange(2 * K, device=dev) + 2 * K * is_eos.long()).topk(K, 1, False).indices
        scores, prev = top.gather(1, live), tok.gather(1, live).reshape(-1)
        hist, hist_attn = take(cand, live), None if cand_attn is None else take(cand_attn, live)
        state = reorder(state, beam_rows(torch.arange(b, device=dev), origin.gather(1, live)))
        best_live = scores[:, 0] if track is None else _keep(track, live, scores)
        done = _done(done, fin, ids, t, limit, best_live, nbest, alpha, early_stop)
        all_done, compact = should_compact(done)
        if all_done:
            break
        if compact:
            keep = (~done).nonzero().squeeze(1)
            ids, done, scores, hist = ids[keep], done[keep], scores[keep], hist[keep]
            hist_attn = None if hist_attn is None else hist_attn[keep]
            prev, state = prev.view(b, K)[keep].reshape(-1), state.select(beam_rows(keep, K))
            if track is not None:
                track.compact(keep)
    return fin.hypotheses(src_mask, nbest)


def _start(
    model: "NMTModel", src: Tensor, src_mask: Tensor, K: int, return_attn: bool
) -> tuple[Tensor, "State", Tensor, Tensor, Tensor, Optional[Tensor], Tensor]:
    """Step 0's active sentences (active sentence -> batch sentence), decoder state (K rows per
    sentence), done flags, beam scores (one live beam at first: no duplicates), empty token and
    attention histories, and the BOS fed first."""
    (B, S), dev = src.shape, src.device
    state = expand(model.init_state(model.encode(src, src_mask)), B, K, dev)
    done, scores = torch.zeros(B, dtype=torch.bool, device=dev), torch.zeros(B, K, device=dev)
    scores[:, 1:] = NEG_INF  # one live beam at first: no duplicates
    hist = torch.zeros(B, K, 0, dtype=torch.long, device=dev)
    hist_attn = torch.zeros(B, K, 0, S, device=dev) if return_attn else None
    prev = torch.full((B * K,), model.bos_id, dtype=torch.long, device=dev)
    return torch.arange(B, device=dev), state, done, scores, hist, hist_attn, prev


def _keep(track: Tracker, live: Tensor, scores: Tensor) -> Tensor:
    """Keep the live beams' constraint progress; the best live score for early stopping: the
    beams are in allocation order, not best first."""
    track.keep(live)
    return scores.amax(1)
