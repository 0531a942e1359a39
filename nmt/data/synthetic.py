"""The built-in synthetic parallel corpus: a seeded toy language pair that behaves like translation.

The source language is SVO with determiners and adjectives before the noun; the target language is
verb-final, puts adjectives after the noun and marks agreement on function words. A translation is
a mostly word-for-word mapping plus reordering and agreement, which an attention model learns in a
few hundred steps, while a fixed-vector encoder has to squeeze a whole long sentence into one
vector. The target vocabulary is about as small as the source's (agreement lives on 16 function
words, not on every content word), so a word-level vocabulary learns fast.

    source: le  vulo dimol ko  ne  peno  un tovun      beno les    ragu sur tis      tovun
            the big  dog   who not chase a  cat        sees the.PL box  on  these    cat
    target: fiju zejo ha    thu chochu jazu fuyi  cha    yuwi ho    chochu jazu ye    fi fuze sha
            dog  big  the.a who cat(2 words) chase NEG.a box  the.d cat         DEM.b on see  AUX.a

(a-d: the agreement class, masculine/feminine x singular/plural: `dimol` is masculine singular.)

Rules (each makes target position j depend on source positions far from j):
- clauses are S V O [PP] in the source and S O [PP] V AUX in the target, also inside relative
  clauses; AUX agrees with the subject (with the head noun in a relative clause) and is negative
  when `ne` precedes the source verb; a preposition becomes a postposition;
- `det adj1 adj2 noun` becomes `noun adj2 adj1 det`: the determiner agrees with the noun's gender
  (a lexical property of the target noun) and number (from the source determiner); the
  indefinite article has no translation;
- one-to-many: some nouns become two-word compounds, some verbs a noun + light-verb pair;
  many-to-one: a verb followed by a particle (`V ap`) is an idiom with its own target verb;
- sentences chain clauses with `en` (and), `mas` (but) or a subordinator (`por`, `kan`, `si`,
  `dum`); coordinators stay between clauses, subordinators move to the end of their clause.

A third language, `alt`, makes the corpus three-way parallel for multilingual training
(`data.directions`): the source language's grammar and word order with every word respelled,
reversed behind a `k` (`un tager` -> `knu kregat`). Its text is a function of the source text, so
`alt -> tgt` is as hard as `src -> tgt`, and `alt <-> src` can be left out of training and asked
for zero-shot or through a pivot. The language keys `src`, `tgt` and `alt` name the three; any
other pair of keys (one direction, e.g. `de` and `en`) names the source and target languages.

Content words (`SyntheticConfig.lexicon` of them: 45% nouns, 30% verbs, 25% adjectives) are
made-up strings with Zipfian frequencies, built from disjoint consonant inventories so that no
target word is ever a copy of a source word. Every source sentence has exactly one parse (verb
transitivity is lexical, relative clauses do not nest and carry no PP), so the target is a function
of the source and BLEU 100 is reachable.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Iterable, Iterator, Optional

from nmt.config import SyntheticConfig
from nmt.data.synthetic_lexicon import (
    DEF,
    LINK_WEIGHTS,
    LINKS,
    PL,
    PREPOSITIONS,
    SG,
    SRC_DET,
    SRC_NEG,
    SRC_REL,
    TGT_AUX,
    TGT_DET,
    TGT_REL,
    Lexicon,
    build_lexicon,
    subseed,
)
from nmt.errors import NmtError
from nmt.files import atomic_write

VERSION = 2  # bump whenever the generated text changes, so cached corpora can be told apart
# (2: the keys src, tgt and alt name the three languages, so `tgt` and `src` swapped swap them)
LANGUAGES = SyntheticConfig.LANGUAGES  # the source language, the target language, `alt`


@dataclass
class NP:
    noun: int
    number: int = SG
    det: int = DEF
    adjs: tuple[int, ...] = ()
    rel: Optional["Clause"] = None  # subject relative clause: this NP is its subject


@dataclass
class Clause:
    verb: int
    subj: Optional[NP] = None  # None inside a relative clause
    obj: Optional[NP] = None
    neg: bool = False
    pp: Optional[tuple[int, NP]] = None  # (preposition index, NP)


# Renderers append (word, links) pairs: `links` names the sentence elements the word translates
# (an element is (role, id(object)); objects live while their clause renders), so a source and a
# target word are aligned when their links meet. That is the generator's own word alignment.
Words = list[tuple[str, frozenset]]


def _el(role: str, obj: object, extra: int = 0) -> frozenset:
    return frozenset({(role, id(obj), extra)})


def _src_np(np: NP, lex: Lexicon, out: Words) -> None:
    out.append((SRC_DET[np.det][np.number], _el("det", np)))
    out.extend((lex.adjectives[a].src, _el("adj", np, k)) for k, a in enumerate(np.adjs))
    out.append((lex.nouns[np.noun].src, _el("noun", np)))
    if np.rel is not None:
        out.append((SRC_REL, _el("rel", np)))
        _src_vp(np.rel, lex, out)


def _src_vp(c: Clause, lex: Lexicon, out: Words) -> None:
    if c.neg:
        out.append((SRC_NEG, _el("neg", c)))
    out.extend((w, _el("verb", c)) for w in lex.verbs[c.verb].src)  # an idiom's particle too
    if c.obj is not None:
        _src_np(c.obj, lex, out)
    if c.pp is not None:
        out.append((PREPOSITIONS[c.pp[0]][0], _el("prep", c)))
        _src_np(c.pp[1], lex, out)


def _tgt_np(np: NP, lex: Lexicon, out: Words) -> int:
    """Append the target NP; return its agreement class 2*gender+number."""
    noun = lex.nouns[np.noun]
    agr = 2 * noun.gender + np.number
    out.extend((w, _el("noun", np)) for w in noun.tgt)
    out.extend(
        (lex.adjectives[a].tgt, _el("adj", np, k)) for k, a in reversed(list(enumerate(np.adjs)))
    )
    if TGT_DET[np.det]:  # the indefinite article has no translation
        out.append((TGT_DET[np.det][agr], _el("det", np)))
    if np.rel is not None:
        out.append((TGT_REL, _el("rel", np)))
        _tgt_vp(np.rel, agr, lex, out)
    return agr


def _tgt_vp(c: Clause, agr: int, lex: Lexicon, out: Words) -> None:
    if c.obj is not None:
        _tgt_np(c.obj, lex, out)
    if c.pp is not None:
        _tgt_np(c.pp[1], lex, out)
        out.append((PREPOSITIONS[c.pp[0]][1], _el("prep", c)))
    out.extend((w, _el("verb", c)) for w in lex.verbs[c.verb].tgt)
    # AUX carries the verb's tense/agreement and, when negative, the negation
    out.append((TGT_AUX[c.neg][agr], _el("verb", c) | (_el("neg", c) if c.neg else frozenset())))


def render_clause_aligned(c: Clause, lex: Lexicon) -> tuple[Words, Words]:
    """Source and target (word, links) pairs of a main clause."""
    assert c.subj is not None, "a main clause has a subject"
    src: Words = []
    _src_np(c.subj, lex, src)
    _src_vp(c, lex, src)
    tgt: Words = []
    _tgt_vp(c, _tgt_np(c.subj, lex, tgt), lex, tgt)
    return src, tgt


def render_clause(c: Clause, lex: Lexicon) -> tuple[list[str], list[str]]:
    """Source and target tokens of a main clause."""
    src, tgt = render_clause_aligned(c, lex)
    return [w for w, _ in src], [w for w, _ in tgt]


def links(src: Words, tgt: Words) -> list[tuple[int, int]]:
    """(source index, target index) pairs whose words translate a common element."""
    return [(i, j) for j, (_, b) in enumerate(tgt) for i, (_, a) in enumerate(src) if a & b]


# ----------------------------------------------------------------------------------------------
# Sampling

P_DET = list(accumulate([50, 35, 15]))  # def, indef, dem
P_PLURAL = 0.4
P_ADJS = list(accumulate([55, 33, 12]))  # 0, 1, 2 adjectives
P_NEG, P_PP = 0.15, 0.3
P_REL_SUBJ, P_REL_OBJ = 0.15, 0.2


class _Zipf:
    """Draws index r with probability proportional to 1 / (r + 1)."""

    def __init__(self, n: int) -> None:
        self.cum = list(accumulate(1.0 / (r + 1) for r in range(n)))

    def draw(self, rng: random.Random) -> int:
        return min(bisect_right(self.cum, rng.random() * self.cum[-1]), len(self.cum) - 1)


class _Grammar:
    """Builds random clauses whose source side fits a word budget."""

    def __init__(self, lex: Lexicon) -> None:
        self.lex = lex
        self.nouns, self.adjs = _Zipf(len(lex.nouns)), _Zipf(len(lex.adjectives))
        self.verbs, self.preps = _Zipf(len(lex.verbs)), _Zipf(len(PREPOSITIONS))
        self.links = list(accumulate(LINK_WEIGHTS))
        # source words a verb needs: itself (+ particle) and a minimal object
        self.cost = [len(v.src) + 2 * v.transitive for v in lex.verbs]
        self.cheapest = min(range(len(lex.verbs)), key=lambda i: (self.cost[i], i))

    def verb(self, rng: random.Random, room: int) -> int:
        for _ in range(8):
            v = self.verbs.draw(rng)
            if self.cost[v] <= room:
                return v
        return self.cheapest

    def np(self, rng: random.Random, room: int) -> NP:
        """A bare NP (2 words) plus as many sampled adjectives as fit in `room` - 2."""
        det = bisect_right(P_DET, rng.random() * P_DET[-1])
        n_adj = min(bisect_right(P_ADJS, rng.random() * P_ADJS[-1]), max(room - 2, 0))
        return NP(
            self.nouns.draw(rng),
            PL if rng.random() < P_PLURAL else SG,
            det,
            tuple(self.adjs.draw(rng) for _ in range(n_adj)),
        )

    def vp(self, rng: random.Random, room: int, main: bool) -> tuple[Clause, int]:
        """A verb phrase of at most `room` source words (room >= 1); returns it and its length."""
        c = Clause(self.verb(rng, room))
        used = len(self.lex.verbs[c.verb].src)
        if self.lex.verbs[c.verb].transitive:
            c.obj = self.np(rng, room - used)
            used += 2 + len(c.obj.adjs)
        if used < room and rng.random() < P_NEG:
            c.neg, used = True, used + 1
        if main and room - used >= 3 and rng.random() < P_PP:
            prep, np = self.preps.draw(rng), self.np(rng, room - used - 1)
            c.pp, used = (prep, np), used + 3 + len(np.adjs)
        if c.obj is not None:
            used += self.relative(rng, c.obj, room - used, P_REL_OBJ if main else 0.0)
        return c, used

    def relative(self, rng: random.Random, np: NP, room: int, p: float) -> int:
        """Maybe attach a relative clause (no deeper nesting); returns the words it adds."""
        if room < 2 or rng.random() >= p:
            return 0
        np.rel, used = self.vp(rng, room - 1, main=False)
        return 1 + used

    def clause(self, rng: random.Random, room: int) -> Clause:
        """A main clause of at most max(room, 3) source words."""
        room = max(room, 3)
        subj = self.np(rng, room - 1)  # leave the verb one word
        c, used = self.vp(rng, room - 2 - len(subj.adjs), main=True)
        c.subj = subj
        self.relative(rng, subj, room - used - 2 - len(subj.adjs), P_REL_SUBJ)
        return c

    def sentence(
        self, rng: random.Random, length: int
    ) -> tuple[list[str], list[str], list[tuple[int, int]]]:
        """Clauses joined by links until the next one would not fit in `length` words; with
        the (source, target) word alignment."""
        first = self.clause(rng, length)
        src, tgt = render_clause_aligned(first, self.lex)
        found = links(src, tgt)
        while length - len(src) - 1 >= 3:
            clause = self.clause(rng, length - len(src) - 1)
            s, t = render_clause_aligned(clause, self.lex)
            link_src, link_tgt, closes = LINKS[
                bisect_right(self.links, rng.random() * self.links[-1])
            ]
            at_s, at_t = len(src) + 1, len(tgt) + (0 if closes else 1)
            link_t = len(tgt) + len(t) if closes else len(tgt)
            found += [(at_s + i, at_t + j) for i, j in links(s, t)] + [(len(src), link_t)]
            src += [(link_src, frozenset())] + s
            tgt += t + [(link_tgt, frozenset())] if closes else [(link_tgt, frozenset())] + t
        return [w for w, _ in src], [w for w, _ in tgt], sorted(found)


def _length(rng: random.Random, cfg: SyntheticConfig) -> int:
    """Target source length: uniform over the short half or (long_fraction) the long half."""
    lo, hi = max(cfg.min_words, 3), cfg.max_words
    mid = (lo + hi + 1) // 2
    if rng.random() < cfg.long_fraction:
        return rng.randint(mid, hi)
    return rng.randint(lo, max(lo, mid - 1))


# ----------------------------------------------------------------------------------------------
# Public API


def iter_aligned(
    cfg: SyntheticConfig, split: str, n: int
) -> Iterator[tuple[str, str, list[tuple[int, int]]]]:
    """`n` (source, target, alignment) triples of `split`, one at a time; each split has its own
    seed. The alignment is the generator's own: (source, target) indices of the words that
    translate one another (function words without a translation have none)."""
    if cfg.min_words > cfg.max_words:
        raise NmtError(f"synthetic min_words ({cfg.min_words}) exceeds max_words ({cfg.max_words})")
    if cfg.max_words < 3:
        raise NmtError(
            f"synthetic max_words must be >= 3 (the shortest sentence), got {cfg.max_words}"
        )
    if n < 0:
        raise NmtError(f"cannot generate a negative number of pairs ({n})")
    grammar = _Grammar(build_lexicon(cfg.seed, cfg.lexicon))
    rng = random.Random(subseed("split", cfg.seed, split))

    def pairs() -> Iterator[tuple[str, str, list[tuple[int, int]]]]:
        made = 0
        while made < n:
            src, tgt, alignment = grammar.sentence(rng, _length(rng, cfg))
            if len(src) >= cfg.min_words:  # rare misses of a tight length window are redrawn
                made += 1
                yield " ".join(src), " ".join(tgt), alignment

    return pairs()


def iter_pairs(cfg: SyntheticConfig, split: str, n: int) -> Iterator[tuple[str, str]]:
    """`n` (source, target) pairs of `split`, one at a time; each split has its own seed."""
    return ((s, t) for s, t, _ in iter_aligned(cfg, split, n))


def generate_aligned(
    cfg: SyntheticConfig, split: str, n: int
) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """generate's pairs with the generator's own word alignment (see iter_aligned)."""
    return list(iter_aligned(cfg, split, n))


def generate(cfg: SyntheticConfig, split: str, n: int) -> list[tuple[str, str]]:
    """`n` (source, target) pairs of `split`; each split has its own seed derived from cfg.seed."""
    return list(iter_pairs(cfg, split, n))


def _write_pairs(src_path: Path, tgt_path: Path, pairs: Iterable[tuple[str, str]]) -> int:
    """Stream pairs into both files at once (atomically: temp files renamed when complete)."""
    count = 0

    def write_tgt(tmp_tgt: Path) -> None:
        def write_src(tmp_src: Path) -> None:
            nonlocal count
            with (
                open(tmp_src, "x", encoding="utf-8") as fs,
                open(tmp_tgt, "x", encoding="utf-8") as ft,
            ):
                for s, t in pairs:
                    fs.write(s + "\n")
                    ft.write(t + "\n")
                    count += 1

        atomic_write(src_path, write_src)

    atomic_write(tgt_path, write_tgt)
    return count


def respell(sentence: str) -> str:
    """The `alt` language: each word of a source-language sentence reversed behind a `k`."""
    return " ".join("k" + w[::-1] for w in sentence.split())


def in_language(pair: tuple[str, str], language: str) -> str:
    """A generated (source, target) pair's sentence in one of the `LANGUAGES`."""
    return respell(pair[0]) if language == "alt" else pair[LANGUAGES.index(language)]


def languages_of(src_lang: str, tgt_lang: str) -> tuple[str, str]:
    """Which of the `LANGUAGES` two language keys write: themselves where both name one (a
    multilingual corpus's direction, e.g. alt-tgt), else the source and target languages."""
    if src_lang in LANGUAGES and tgt_lang in LANGUAGES:
        return src_lang, tgt_lang
    return "src", "tgt"


def write_corpus(
    out_dir: str | Path, cfg: SyntheticConfig, src_lang: str = "src", tgt_lang: str = "tgt"
) -> dict[str, int]:
    """Write line-aligned `{train,valid,test}.{src_lang,tgt_lang}`; return {split: pairs}. Keys
    that name two of the `LANGUAGES` write those two: every direction between src, tgt and alt
    reads the same sentences, so the directions of one config make one three-way corpus."""
    if src_lang == tgt_lang:
        raise NmtError(f"source and target language keys must differ, both are {src_lang!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sides = languages_of(src_lang, tgt_lang)
    counts = {}
    for split, n in (("train", cfg.train), ("valid", cfg.valid), ("test", cfg.test)):
        pairs = (
            (in_language(p, sides[0]), in_language(p, sides[1])) for p in iter_pairs(cfg, split, n)
        )
        counts[split] = _write_pairs(
            out / f"{split}.{src_lang}", out / f"{split}.{tgt_lang}", pairs
        )
    return counts
