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
    from nmt.models.base import NMTModel

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    tokens: list[int]        # output ids, without BOS and without the final EOS
    score: float             # sum of token log-probs including the EOS (no length penalty)
    norm_score: float        # ranking score: score / lp(len(tokens) + 1)
    attn: Optional[Tensor]   # [len(tokens) + 1, S_real] alignment over the real source, or None


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT length penalty ((5 + len) / 6) ** alpha; 1 when alpha is 0."""
    return ((5.0 + length) / 6.0) ** alpha


def max_lengths(src_mask: Tensor, a: float, b: int) -> Tensor:
    """Per-sentence output limit floor(a * src_len + b), src_len = real source tokens."""
    return (a * src_mask.sum(1).double() + b).long()


# ----------------------------------------------------------------------------------------------
# Shared step helpers

def _restrict(log_probs: Tensor, at_limit: Tensor, model: "NMTModel") -> Tensor:
    """Ban PAD and BOS everywhere; rows at their length limit may only emit EOS."""
    vocab = torch.arange(log_probs.size(-1), device=log_probs.device)
    banned = (vocab == model.pad_id) | (vocab == model.bos_id)
    banned = banned | (at_limit.unsqueeze(-1) & (vocab != model.eos_id))
    return log_probs.masked_fill(banned, NEG_INF)


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


def _hypotheses(tokens: Tensor, score: Tensor, norm: Tensor, length: Tensor,
                attn: Optional[Tensor], src_mask: Tensor, nbest: int) -> list[list[Hypothesis]]:
    """Device buffers [B, N, ...] (best first, -inf norm = empty slot) -> Python hypotheses.

    One transfer per buffer; attention keeps the steps incl. EOS and the real source columns."""
    tokens, score, norm, length = (x.cpu().tolist() for x in (tokens, score, norm, length))
    attn, mask = (None if attn is None else attn.cpu()), src_mask.cpu()
    out = []
    for i in range(len(tokens)):
        out.append([Hypothesis(tokens[i][k][:length[i][k] - 1], score[i][k], norm[i][k],
                               None if attn is None else attn[i, k, :length[i][k], mask[i]])
                    for k in range(nbest) if norm[i][k] != NEG_INF])
    return out


# ----------------------------------------------------------------------------------------------
# Greedy search

@torch.inference_mode()
def greedy_search(model: "NMTModel", src: Tensor, src_mask: Tensor, max_len_a: float = 1.5,
                  max_len_b: int = 10, return_attn: bool = False, alpha: float = 0.0
                  ) -> list[list[Hypothesis]]:
    """Pick the most probable token at every step. `alpha` only sets the reported norm_score."""
    B, S = src.shape
    dev = src.device
    limit = max_lengths(src_mask, max_len_a, max_len_b)
    steps = int(limit.max()) + 1                       # + 1 for the EOS
    out_tok = torch.full((B, steps), model.pad_id, dtype=torch.long, device=dev)
    out_score = torch.zeros(B, device=dev)
    out_len = torch.zeros(B, dtype=torch.long, device=dev)
    out_attn: Optional[Tensor] = torch.zeros(B, steps, S, device=dev) if return_attn else None

    state = model.init_state(model.encode(src, src_mask))
    ids = torch.arange(B, device=dev)                  # active row -> sentence
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    prev = torch.full((B,), model.bos_id, dtype=torch.long, device=dev)
    for t in range(steps):
        log_probs, state, attn = model.decode_step(state, prev)
        log_probs = _restrict(log_probs.float(), t >= limit[ids], model)
        tok_lp, tok = log_probs.max(-1)
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

    if attn is None:                                   # a model without attention
        out_attn = None
    norm = out_score / length_penalty(out_len, alpha)
    one = (x.unsqueeze(1) for x in (out_tok, out_score, norm, out_len))
    return _hypotheses(*one, None if out_attn is None else out_attn.unsqueeze(1), src_mask, 1)


# ----------------------------------------------------------------------------------------------
# Beam search

class _Finished:
    """The K best ended hypotheses of every sentence, kept on the device sorted by norm score."""

    def __init__(self, B: int, K: int, steps: int, S: int, with_attn: bool, pad: int,
                 device: torch.device) -> None:
        self.K, self.steps, self.pad = K, steps, pad
        self.norm = torch.full((B, K), NEG_INF, device=device)
        self.score = torch.zeros(B, K, device=device)
        self.length = torch.zeros(B, K, dtype=torch.long, device=device)
        self.tokens = torch.full((B, K, steps), pad, dtype=torch.long, device=device)
        self.attn = torch.zeros(B, K, steps, S, device=device) if with_attn else None

    def add(self, ids: Tensor, ended: Tensor, score: Tensor, tokens: Tensor,
            attn: Optional[Tensor], alpha: float) -> None:
        """Merge the `ended` candidates [b, K] (length tokens.size(2)) into sentences `ids`."""
        length = tokens.size(2)
        norm = torch.where(ended, score / length_penalty(length, alpha), NEG_INF)
        best = torch.cat([self.norm[ids], norm], 1).topk(self.K, dim=1).indices

        def merge(old: Tensor, new: Tensor) -> Tensor:
            return _take(torch.cat([old[ids], new], 1), best)

        room = self.steps - length                     # pad candidates to the buffer length
        self.norm[ids] = merge(self.norm, norm)
        self.score[ids] = merge(self.score, score)
        self.length[ids] = merge(self.length, torch.full_like(self.length[ids], length))
        self.tokens[ids] = merge(self.tokens, F.pad(tokens, (0, room), value=self.pad))
        if self.attn is not None and attn is not None:
            self.attn[ids] = merge(self.attn, F.pad(attn, (0, 0, 0, room)))

    def count(self, ids: Tensor) -> Tensor:
        return torch.isfinite(self.norm[ids]).sum(1)

    def hypotheses(self, src_mask: Tensor, nbest: int) -> list[list[Hypothesis]]:
        return _hypotheses(self.tokens, self.score, self.norm, self.length, self.attn, src_mask,
                           nbest)


@torch.inference_mode()
def beam_search(model: "NMTModel", src: Tensor, src_mask: Tensor, beam: int = 5,
                alpha: float = 0.6, max_len_a: float = 1.5, max_len_b: int = 10, nbest: int = 1,
                return_attn: bool = False) -> list[list[Hypothesis]]:
    """Batched beam search: batch * beam decoder rows, top-k over beam * V candidates per step.

    A sentence is done once it holds `beam` finished hypotheses (ended inside the top `beam`
    candidates of a step) or reaches its length limit, where every live beam is ended.
    """
    if beam < 1 or not 1 <= nbest <= beam:
        raise NmtError(f"beam search needs 1 <= nbest <= beam, got beam={beam}, nbest={nbest}")
    B, S = src.shape
    K, dev = beam, src.device
    limit = max_lengths(src_mask, max_len_a, max_len_b)
    steps = int(limit.max()) + 1
    fin = _Finished(B, K, steps, S, return_attn, model.pad_id, dev)

    ids = torch.arange(B, device=dev)                  # active sentence -> batch sentence
    state = model.init_state(model.encode(src, src_mask)).select(ids.repeat_interleave(K))
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    scores = torch.zeros(B, K, device=dev)
    scores[:, 1:] = NEG_INF                            # one live beam at first: no duplicates
    hist = torch.zeros(B, K, 0, dtype=torch.long, device=dev)
    hist_attn = torch.zeros(B, K, 0, S, device=dev) if return_attn else None
    prev = torch.full((B * K,), model.bos_id, dtype=torch.long, device=dev)
    for t in range(steps):
        log_probs, state, attn = model.decode_step(state, prev)
        if attn is None:                               # a model without attention
            hist_attn = fin.attn = None
        b = ids.numel()
        log_probs = _restrict(log_probs.float().view(b, K, -1), (t >= limit[ids]).unsqueeze(1),
                              model)
        V = log_probs.size(-1)
        # 2K candidates: even if K of them end here, K live ones remain.
        top, idx = (scores.unsqueeze(-1) + log_probs).view(b, K * V).topk(2 * K, dim=1)
        origin, tok = idx // V, idx % V
        cand = torch.cat([_take(hist, origin), tok.unsqueeze(2)], 2)          # [b, 2K, t+1]
        cand_attn = None
        if hist_attn is not None and attn is not None:
            step_attn = _take(attn.float().view(b, K, S), origin).unsqueeze(2)
            cand_attn = torch.cat([_take(hist_attn, origin), step_attn], 2)  # [b, 2K, t+1, S]

        is_eos = tok == model.eos_id
        ended = is_eos[:, :K] & torch.isfinite(top[:, :K]) & ~done.unsqueeze(1)
        fin.add(ids, ended, top[:, :K], cand[:, :K],
                None if cand_attn is None else cand_attn[:, :K], alpha)

        # The K best candidates that did not end stay live (stable order: best first).
        rank = torch.arange(2 * K, device=dev) + 2 * K * is_eos.long()
        live = rank.topk(K, dim=1, largest=False).indices
        scores, prev = top.gather(1, live), tok.gather(1, live).reshape(-1)
        hist = _take(cand, live)
        hist_attn = None if cand_attn is None else _take(cand_attn, live)
        state = state.select(_beam_rows(torch.arange(b, device=dev), origin.gather(1, live)))

        done = done | (fin.count(ids) >= K) | (t >= limit[ids])
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


def decode_batch(model: "NMTModel", src: Tensor, src_mask: Tensor, cfg: DecodeConfig,
                 beam: int | None = None, nbest: int | None = None, return_attn: bool = False
                 ) -> list[list[Hypothesis]]:
    """Greedy search for beam 1, beam search otherwise; alpha and length limits from cfg."""
    beam = cfg.beam if beam is None else beam
    nbest = min(cfg.nbest, beam) if nbest is None else nbest
    if beam < 1 or not 1 <= nbest <= beam:
        raise NmtError(f"decoding needs 1 <= nbest <= beam, got beam={beam}, nbest={nbest}")
    with torch.inference_mode(), _eval_mode(model):
        greedy = greedy_search(model, src, src_mask, cfg.max_len_a, cfg.max_len_b,
                               return_attn, alpha=cfg.alpha)
        if beam == 1:
            return greedy
        beams = beam_search(model, src, src_mask, beam, cfg.alpha, cfg.max_len_a,
                            cfg.max_len_b, nbest, return_attn)
    # Beam search is not exact: a greedy path pruned early can end better than every kept beam
    # (mostly when hypotheses run into the length limit). Offering the greedy hypothesis as one
    # more candidate costs one cheap pass and guarantees beam >= greedy in model score.
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


def translate_ids(model: "NMTModel", src_ids: list[list[int]], cfg: DecodeConfig,
                  beam: int | None = None, nbest: int | None = None, return_attn: bool = False,
                  device: str | torch.device = "cpu", progress: bool = False
                  ) -> list[list[Hypothesis]]:
    """Decode source id lists (each ending with EOS) in length-sorted batches; input order out."""
    for i, s in enumerate(src_ids):
        if not s:
            raise NmtError(f"source sentence {i} is empty; expected at least the EOS token")
    lengths = [len(s) for s in src_ids]
    order = sorted(range(len(src_ids)), key=lambda i: -lengths[i])   # longest first
    results: list[list[Hypothesis]] = [[] for _ in src_ids]
    with torch.inference_mode(), tqdm(total=len(src_ids), disable=not progress, file=sys.stderr,
                                      unit="sent", desc="decode") as bar:
        for batch in _batches(order, lengths, cfg.batch_tokens):
            src, mask = pad_batch([src_ids[i] for i in batch], model.pad_id)
            src, mask = src.to(device), mask.to(device)
            for i, hyps in zip(batch, decode_batch(model, src, mask, cfg, beam, nbest,
                                                   return_attn)):
                results[i] = hyps
            bar.update(len(batch))
    return results
