"""Lexically constrained decoding: phrases of target ids that must appear in a sentence's output,
in any order (positive), or must not (negative), and beam search's state that tracks them.

Beam search allocates its K slots by dynamic beam allocation (Post & Vilar 2018) in its
vectorized form (Hu et al. 2019): each step, beside the 2K best continuations of the sentence,
every live beam offers its own best token and the tokens that advance one of its unmet phrases
(the next token of the phrase, and its first token). The candidates are grouped into banks by how
many constraint tokens they have met, and the beam is filled round-robin with the best of each
bank, highest bank first. A hypothesis may end only once it has met all its positive phrases, or
at its length limit, where it ends anyway and reports how many it missed; a token that would
complete a negative phrase is never emitted.

A hypothesis' progress through a phrase is the longest prefix of the phrase that its tokens end
with, recomputed from its last tokens each step: an interrupted phrase falls back (to nothing, or
to the part it starts again), and a phrase is met exactly when it occurs in the output. Given the
target pieces that continue a word (`joiners`), a phrase is met only as whole words: the token
after the step that first completes it may not be one of them, so "construction" is never met
by "constructions" (inside a forced prefix, which may continue the word, the phrase is unmet
again instead). Negative (excluded) phrases are kept out as pieces, even inside a longer word,
and, given the vocabulary's pieces as text, also as the text of whole words however the model
spells them (`nmt.search.excluded_text`).

Memory: with K beams, C positive phrases of at most L tokens and N excluded phrases per
sentence, a step holds [b, M, C, L] booleans and [b, M, C] integers with M = 3K + 2KC candidates
per sentence, and the text check walks K x N phrases per sentence; `nmt.decode` keeps b x M x C x
L under a fixed budget, and decode.max_phrases / max_phrase_tokens bound C, N and L
(docs/terminology.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.errors import NmtError
from nmt.search.excluded_text import PieceText, completing_tokens, pattern
from nmt.search.hypotheses import NEG_INF
from nmt.search.rows import take
from nmt.search.top_k import row_max, row_topk

NO_TOKEN = -1  # before a hypothesis' first token; an offer that is no offer
GAP = -2  # after a positive phrase's end: matches no token
ANY = -3  # before a (right-aligned) negative phrase's start: matches any token

Phrases = list[list[list[int]]]  # per sentence, its phrases of target ids


@dataclass
class Constraints:
    """The constraints of a batch of B sentences, padded into tensors on the search's device."""

    phrases: Tensor  # [B, C, L] positive phrases, GAP after each phrase's end and for no phrase
    lengths: Tensor  # [B, C] their lengths, 0 for no phrase
    # [B, N, M] negative (excluded) phrases right-aligned, ANY before their start and for none
    excluded: Tensor
    joiners: Optional[Tensor] = None  # [J] target ids that continue a word (None: piece level)
    pieces: Optional[PieceText] = None  # the target pieces as text (None: negatives as pieces)
    excluded_text: Optional[list[list[str]]] = None  # [B] negative phrases as text (`pattern`)

    @classmethod
    def build(
        cls,
        positive: Optional[Phrases],
        negative: Optional[Phrases] = None,
        device: str | torch.device = "cpu",
        reserved: Sequence[int] = (),
        joiners: Optional[Sequence[int]] = None,
        pieces: Optional[PieceText] = None,
    ) -> "Constraints":
        """From per-sentence phrase lists (None: no phrases of that kind); `reserved` are ids no
        phrase may hold (PAD, BOS, EOS); `joiners`, the target ids that continue a word
        (`Tokenizer.word_joiners`), make positive phrases whole words; `pieces`, the target
        vocabulary as text, keeps negative phrases out as text too (a phrase that spells no
        text is kept out as pieces only)."""
        check_constraints(positive, negative, reserved)
        B = len(positive if positive is not None else negative or [])
        positive = positive if positive is not None else [[] for _ in range(B)]
        negative = negative if negative is not None else [[] for _ in range(B)]
        phrases = _pad(positive, GAP, right=False)
        lengths = torch.tensor(
            [[len(p) for p in ps] + [0] * (phrases.size(1) - len(ps)) for ps in positive],
            dtype=torch.long,
        ).view(B, phrases.size(1))
        join = None if joiners is None else torch.tensor(list(joiners), dtype=torch.long)
        texts = None
        if pieces is not None and any(negative):
            texts = [[t for t in (pattern(pieces, p) for p in ps) if t] for ps in negative]
        return cls(
            phrases.to(device),
            lengths.to(device),
            _pad(negative, ANY, True).to(device),
            None if join is None else join.to(device),
            pieces,
            texts,
        )

    def take(self, index: Tensor) -> "Constraints":
        """The constraints of sentences `index`."""
        texts = self.excluded_text
        return Constraints(
            self.phrases[index],
            self.lengths[index],
            self.excluded[index],
            self.joiners,
            self.pieces,
            None if texts is None else [texts[i] for i in index.tolist()],
        )


def _pad(phrases: Phrases, fill: int, right: bool) -> Tensor:
    """[B, most phrases, longest phrase] of ids, `fill` elsewhere; right-aligned if `right`."""
    C = max((len(ps) for ps in phrases), default=0)
    L = max((len(p) for ps in phrases for p in ps), default=1)
    out = torch.full((len(phrases), C, L), fill, dtype=torch.long)
    for i, ps in enumerate(phrases):
        for c, p in enumerate(ps):
            if right:
                out[i, c, L - len(p) :] = torch.tensor(p)
            else:
                out[i, c, : len(p)] = torch.tensor(p)
    return out


def check_constraints(
    positive: Optional[Phrases], negative: Optional[Phrases], reserved: Sequence[int] = ()
) -> None:
    """Raise NmtError, naming the sentence (counted from 0), for an empty phrase or an id that
    is not an ordinary target id. (A negative phrase inside a positive one is refused, on text
    and on pieces, where users write them: `nmt.data.constraints_file.encode_line`.)"""
    if positive is not None and negative is not None and len(positive) != len(negative):
        raise NmtError(
            f"{len(positive)} positive and {len(negative)} negative constraint lists; expected "
            f"one of each per sentence"
        )
    for kind, lists in (("positive", positive), ("negative", negative)):
        for i, phrases in enumerate(lists or []):
            for p in phrases:
                bad = [x for x in p if type(x) is not int or x < 0 or x in reserved]
                if not p or bad:
                    what = "is empty" if not p else f"holds id {bad[0]!r}"
                    raise NmtError(
                        f"sentence {i}: {kind} constraint {p} {what}; expected ordinary "
                        f"target ids (not PAD, BOS or EOS)"
                    )


def _tail(hist: Tensor, n: int) -> Tensor:
    """The last n tokens of each history [b, K, t] -> [b, K, n], NO_TOKEN before the first."""
    if n == 0:
        return hist[:, :, :0]
    last = hist[:, :, max(hist.size(2) - n, 0) :]
    return F.pad(last, (n - last.size(2), 0), value=NO_TOKEN)


def _progress(tails: Tensor, phrases: Tensor) -> Tensor:
    """tails [b, M, L] (each candidate's last L tokens), phrases [b, C, L] -> [b, M, C]: the
    longest prefix of each phrase that each candidate ends with (the phrase's length: met)."""
    b, M, L = tails.shape
    prog = torch.zeros(b, M, phrases.size(1), dtype=torch.long, device=tails.device)
    for j in range(1, L + 1):  # GAP past a phrase's end: no prefix longer than the phrase
        hit = (tails[:, :, None, L - j :] == phrases[:, None, :, :j]).all(-1)
        prog.masked_fill_(hit, j)
    return prog


def _unique(score: Tensor, key: Tensor) -> Tensor:
    """Scores [b, M] with every repeat of an earlier candidate's key (beam, token) at -inf."""
    sorted_key, where = key.sort(dim=1, stable=True)  # a key's first candidate stays first
    repeat = F.pad(sorted_key[:, 1:] == sorted_key[:, :-1], (1, 0), value=False)
    return score.masked_fill(torch.zeros_like(repeat).scatter_(1, where, repeat), NEG_INF)


def _allocate(score: Tensor, bank: Tensor, late: Tensor, top: int, n: int) -> Tensor:
    """The n candidates [b, n] that fill the beam: the best of each bank, highest bank first, then
    the second best of each, and so on; then in the same order those too `late` to meet their
    constraints, then those at -inf."""
    order = score.argsort(dim=1, descending=True, stable=True)
    bank, late = bank.gather(1, order), late.gather(1, order)
    member = F.one_hot(bank + (top + 1) * late, 2 * (top + 1))  # late ones: banks of their own
    rank = (member.cumsum(1) * member).sum(2) - 1  # place within its bank, best first
    stride = score.size(1) * (top + 1)  # above every stripe of the candidates on time
    stripe = rank * (top + 1) + (top - bank) + stride * late
    stripe = stripe.masked_fill(~torch.isfinite(score.gather(1, order)), 2 * stride)
    return order.gather(1, stripe.argsort(dim=1, stable=True)[:, :n])


class Tracker:
    """Beam search's [b, K] live hypotheses' progress through their sentences' constraints, the
    masks it implies, and the step's candidates by dynamic beam allocation."""

    def __init__(self, cons: Constraints, K: int, eos: int, prefix_len: Optional[Tensor]) -> None:
        B, C, _ = cons.phrases.shape
        self.cons, self.eos, self.prefix_len = cons, eos, prefix_len
        self.positive = C > 0  # else only negative phrases: plain candidates and masks
        self.top = int(cons.lengths.sum(1).max()) if self.positive else 0  # the highest bank
        self.met = (cons.lengths == 0).unsqueeze(1).expand(B, K, C).clone()  # [b, K, C]
        self.prog = torch.zeros(B, K, C, dtype=torch.long, device=cons.phrases.device)
        # [b, K, C]: the phrases the beam's last token first completed, so the next token must
        # not continue that word (with cons.joiners): excluded, or inside a forced prefix,
        # which may continue it, the phrase is unmet again
        self.fresh = torch.zeros(B, K, C, dtype=torch.bool, device=cons.phrases.device)
        self.picked = (self.met, self.prog, self.fresh)  # of the step's 2K candidates
        self._joins: Optional[Tensor] = None  # [V] bool: cons.joiners as a mask

    def _forced(self, t: int) -> Optional[Tensor]:
        """[b] whether step t is inside each sentence's forced prefix; None without prefixes."""
        return None if self.prefix_len is None else t < self.prefix_len

    def mask(self, log_probs: Tensor, hist: Tensor, t: int, at_limit: Tensor) -> Tensor:
        """log_probs [b*K, V] of the live beams (histories hist [b, K, t]), in place: EOS at -inf
        for a beam with an unmet phrase unless at its limit (where it ends marked unmet), a
        token that continues the word of a phrase just met, and every token that would
        complete a negative phrase, except inside a forced prefix."""
        forced = self._forced(t)
        if self.positive:
            unmet = (~self.met).any(2).flatten() & ~at_limit
            log_probs[:, self.eos].masked_fill_(unmet, NEG_INF)
            fresh = self.fresh.any(2)
            if forced is not None:
                fresh &= ~forced.unsqueeze(1)
            if self.cons.joiners is not None and bool(fresh.any()):
                rows = fresh.flatten().nonzero()  # [r, 1]
                log_probs[rows, self.cons.joiners.unsqueeze(0)] = NEG_INF
        if self.cons.excluded_text is not None:
            self._exclude_text(log_probs, hist, forced)
        excluded = self.cons.excluded  # [b, N, M]
        if excluded.size(1) == 0:
            return log_probs
        b, K, V = hist.size(0), hist.size(1), log_probs.size(1)
        before = excluded[:, None, :, :-1]
        tails = _tail(hist, excluded.size(2) - 1).unsqueeze(2)  # [b, K, 1, M - 1]
        match = ((tails == before) | (before == ANY)).all(-1)  # [b, K, N]
        if forced is not None:  # a forced prefix wins, as over repeated n-grams
            match &= ~forced.view(b, 1, 1)
        last = excluded[:, None, :, -1].expand(b, K, -1)
        out = last.masked_fill(~match | (last < 0), V).reshape(b * K, -1)
        hit = torch.zeros(b * K, V + 1, dtype=torch.bool, device=log_probs.device)
        return log_probs.masked_fill_(hit.scatter_(1, out, True)[:, :V], NEG_INF)

    def _exclude_text(self, log_probs: Tensor, hist: Tensor, forced: Optional[Tensor]) -> None:
        """Every token that would complete a negative phrase's text as whole words at -inf, in
        place (`nmt.search.excluded_text`), except inside a forced prefix."""
        texts, pieces = self.cons.excluded_text, self.cons.pieces
        # pieces spell a character or more (specials none: one more to spare for a tag)
        longest = max((len(p) for ps in texts for p in ps), default=0)
        if not longest:  # the sentences left hold none
            return
        m = longest + 2
        last, whole, K = hist[:, :, -m:].tolist(), hist.size(2) <= m, hist.size(1)
        inside = [] if forced is None else forced.tolist()
        rows: list[int] = []
        toks: list[int] = []
        for i, phrases in enumerate(texts):
            if not phrases or (inside and inside[i]):
                continue
            for k in range(K):
                tail = pieces.text(last[i][k])
                for phrase in phrases:
                    out = completing_tokens(pieces, tail, whole, phrase)
                    rows += [i * K + k] * len(out)
                    toks += out
        if rows:
            dev = log_probs.device
            log_probs[torch.tensor(rows, device=dev), torch.tensor(toks, device=dev)] = NEG_INF

    def candidates(
        self, total: Tensor, hist: Tensor, t: int, limit: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """total [b, K, V] (each live beam's score plus each token's log-prob), hist [b, K, t],
        the sentences' length limits [b] -> the 2K candidates in the order they fill the beam:
        scores, tokens, origin beams."""
        score, tok, origin = self._offers(total)
        lengths = self.cons.lengths
        L = self.cons.phrases.size(2)
        tails = torch.cat([take(_tail(hist, L - 1), origin), tok.unsqueeze(2)], 2)
        prog = _progress(tails, self.cons.phrases)
        before = take(self.met, origin)
        if self.cons.joiners is not None:  # a forced token went on with a phrase's word
            before &= ~(take(self.fresh, origin) & self._joiner(tok, total.size(2)).unsqueeze(2))
        met = before | (prog == lengths.unsqueeze(1))
        fresh = met & ~before
        # Post & Vilar's bank: constraint tokens met, counting the phrase in progress.
        bank = (lengths.unsqueeze(1) * met).sum(2) + (prog * ~met).amax(2)
        # A candidate with more constraint tokens to go than tokens left before its limit can
        # only end unmet: it gets a slot only when no other candidate wants it (phrases that
        # overlap can need fewer tokens than this counts, a rare case that only loses priority).
        room = (limit - t - 1).clamp(min=0).unsqueeze(1)
        late = lengths.sum(1, keepdim=True) - bank > room
        pick = _allocate(score, bank, late, self.top, 2 * total.size(1))
        self.picked = (take(met, pick), take(prog, pick), take(fresh, pick))
        return score.gather(1, pick), tok.gather(1, pick), origin.gather(1, pick)

    def _joiner(self, tok: Tensor, V: int) -> Tensor:
        """Whether each token of `tok` continues the word before it (cons.joiners)."""
        if self._joins is None:
            joins = torch.zeros(V, dtype=torch.bool, device=tok.device)
            self._joins = joins.index_fill_(0, self.cons.joiners, True)
        return self._joins[tok]

    def _offers(self, total: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Every candidate worth a place, [b, 2K + K + 2KC] scores (repeats at -inf), tokens and
        origin beams: the 2K best overall, each beam's best, and each beam's next and first
        token of each unmet phrase."""
        (b, K, V), dev = total.shape, total.device
        phrases = self.cons.phrases
        top, idx = row_topk(total.view(b, K * V), 2 * K)
        best, best_tok = row_max(total.view(b * K, V))
        at = self.prog.clamp(max=phrases.size(2) - 1).unsqueeze(3)
        following = phrases.unsqueeze(1).expand(-1, K, -1, -1).gather(3, at).squeeze(3)
        first = phrases[:, None, :, 0].expand(-1, K, -1)
        offer = torch.cat([following, first], 2).masked_fill(self.met.repeat(1, 1, 2), NO_TOKEN)
        offer_score = total.gather(2, offer.clamp(min=0)).masked_fill(offer < 0, NEG_INF)
        beams = torch.arange(K, device=dev)
        score = torch.cat([top, best.view(b, K), offer_score.flatten(1)], 1)
        tok = torch.cat([idx % V, best_tok.view(b, K), offer.clamp(min=0).flatten(1)], 1)
        origin = torch.cat(
            [idx // V, beams.expand(b, K), beams.repeat_interleave(offer.size(2)).expand(b, -1)], 1
        )
        return _unique(score, origin * V + tok), tok, origin

    def unmet(self, n: int) -> Tensor:
        """[b, n]: how many positive phrases each of the step's first n candidates misses."""
        return (~self.picked[0][:, :n]).sum(2)

    def keep(self, live: Tensor) -> None:
        """The step's candidates `live` [b, K] are the new live beams."""
        if self.positive:
            self.met, self.prog, self.fresh = (take(x, live) for x in self.picked)

    def compact(self, keep: Tensor) -> None:
        """Only the active sentences `keep` go on."""
        self.cons, self.met, self.prog = self.cons.take(keep), self.met[keep], self.prog[keep]
        self.fresh = self.fresh[keep]
        self.picked = (self.met, self.prog, self.fresh)
        if self.prefix_len is not None:
            self.prefix_len = self.prefix_len[keep]
