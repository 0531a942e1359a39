"""The words of the synthetic language pair (see `nmt.data.synthetic`): function words, and a
seeded lexicon of made-up content words with their target translations and lexical properties
(gender, transitivity, compounds, light verbs, idioms)."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from functools import lru_cache

from nmt.errors import NmtError

SG, PL = 0, 1
DEF, INDEF, DEM = 0, 1, 2

# ----------------------------------------------------------------------------------------------
# Function words. Source words use only the letters below; every target word contains one of
# f h j w y z, so the two vocabularies are disjoint.

SRC_ONSETS = "b d g k l m n p r s t v".split()
SRC_CODAS = ["", "", "", "n", "r", "s", "l", "m"]
TGT_ONSETS = "f h j w y z sh ch th".split()
VOWELS = "a e i o u".split()

# The target marks agreement class 2 * gender + number with a vowel on two function words.
AGR_VOWELS = "a e i o".split()
SRC_DET = {DEF: ("le", "les"), INDEF: ("un", "dus"), DEM: ("ti", "tis")}  # [kind][number]
TGT_DET = {
    DEF: tuple("h" + v for v in AGR_VOWELS),
    DEM: tuple("y" + v for v in AGR_VOWELS),
    INDEF: None,
}  # [kind][agreement]
TGT_AUX = {
    neg: tuple(c + v for v in AGR_VOWELS)  # [negated][agreement]
    for neg, c in ((False, "sh"), (True, "ch"))
}
SRC_REL, TGT_REL = "ko", "thu"
SRC_NEG = "ne"
PREPOSITIONS = [("in", "fa"), ("sur", "fi"), ("kon", "fo"), ("ad", "fu"), ("de", "fe")]
PARTICLES = ["ap", "ot", "bi"]
# (source, target, is_subordinator): subordinators close their clause in the target
LINKS = [
    ("en", "zu", False),
    ("mas", "za", False),
    ("por", "jeze", True),
    ("kan", "jafu", True),
    ("si", "zi", True),
    ("dum", "jewa", True),
]
LINK_WEIGHTS = [40, 15, 15, 12, 10, 8]

RESERVED = (
    {
        w
        for forms in (*SRC_DET.values(), *TGT_DET.values(), *TGT_AUX.values())
        if forms
        for w in forms
    }
    | {SRC_REL, TGT_REL, SRC_NEG}
    | {w for p in PREPOSITIONS for w in p}
    | set(PARTICLES)
    | {w for s, t, _ in LINKS for w in (s, t)}
)

# Shares of the lexicon and rates of the optional constructions.
NOUN_SHARE, VERB_SHARE = 0.45, 0.30
COMPOUND_RATE = 0.10  # nouns that become two target words
LIGHT_VERB_RATE = 0.15  # verbs that become incorporated noun + light verb
IDIOM_RATE = 0.17  # verbs that also form a `verb particle` idiom
TRANSITIVE_RATE = 0.65


# ----------------------------------------------------------------------------------------------
# Lexicon


@dataclass(frozen=True)
class Noun:
    src: str
    gender: int  # lexical, visible only through agreement
    tgt: tuple[str, ...]  # one word or a two-word compound


@dataclass(frozen=True)
class Adjective:
    src: str
    tgt: str


@dataclass(frozen=True)
class Verb:
    src: tuple[str, ...]  # one word, or an idiom `verb particle`
    transitive: bool
    tgt: tuple[str, ...]  # one word, or incorporated noun + light verb


@dataclass(frozen=True)
class Lexicon:
    """Entries in Zipf rank order (index 0 is the most frequent)."""

    nouns: tuple[Noun, ...]
    adjectives: tuple[Adjective, ...]
    verbs: tuple[Verb, ...]


def subseed(*parts: object) -> int:
    """A seed that depends only on `parts` (stable across processes, unlike hash())."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


class _WordMaker:
    """Fresh made-up words; no word is ever produced twice."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used = set(RESERVED)

    def _fresh(self, make, syllables: int) -> str:
        for attempt in range(10_000):
            word = make(syllables + attempt // 50)  # lengthen words once short ones run out
            if word not in self.used:
                self.used.add(word)
                return word
        raise AssertionError("unreachable: the word space grows with length")

    def source(self, syllables: int) -> str:
        r = self.rng
        return self._fresh(
            lambda k: (
                "".join(r.choice(SRC_ONSETS) + r.choice(VOWELS) for _ in range(k))
                + r.choice(SRC_CODAS)
            ),
            syllables,
        )

    def target(self, syllables: int) -> str:
        r = self.rng
        return self._fresh(
            lambda k: "".join(r.choice(TGT_ONSETS) + r.choice(VOWELS) for _ in range(k)), syllables
        )


@lru_cache(maxsize=8)
def build_lexicon(seed: int, size: int) -> Lexicon:
    """The lexicon of `size` source content words; depends only on (seed, size)."""
    if size < 20:
        raise NmtError(f"synthetic lexicon needs at least 20 words, got {size}")
    rng = random.Random(subseed("lexicon", seed, size))
    words = _WordMaker(rng)
    n_noun, n_verb = round(size * NOUN_SHARE), round(size * VERB_SHARE)
    n_adj = size - n_noun - n_verb

    def syllables(rank: int, n: int) -> int:  # frequent words are short
        return 2 if rank < n // 3 else rng.choice((2, 3))

    def one_or_two(rank: int, n: int, rate: float) -> tuple[str, ...]:
        first = (words.target(2),) if rng.random() < rate else ()
        return first + (words.target(syllables(rank, n)),)

    nouns = [
        Noun(
            words.source(syllables(r, n_noun)),
            rng.randrange(2),
            one_or_two(r, n_noun, COMPOUND_RATE),
        )
        for r in range(n_noun)
    ]
    adjectives = [
        Adjective(words.source(syllables(r, n_adj)), words.target(syllables(r, n_adj)))
        for r in range(n_adj)
    ]
    light = words.target(2)  # the light verb "do": `swim` -> `swim-noun do`
    verbs = []
    for r in range(n_verb):
        # rank 0 transitive, rank 1 intransitive: short sentences always have a verb that fits
        transitive = r == 0 or (r > 1 and rng.random() < TRANSITIVE_RATE)
        tgt = (
            (words.target(2), light)
            if r > 1 and rng.random() < LIGHT_VERB_RATE
            else (words.target(syllables(r, n_verb)),)
        )
        verbs.append(Verb((words.source(syllables(r, n_verb)),), transitive, tgt))
    for base in [v for v in verbs[2:] if rng.random() < IDIOM_RATE]:
        idiom = Verb(
            (base.src[0], rng.choice(PARTICLES)), rng.random() < TRANSITIVE_RATE, (words.target(3),)
        )
        verbs.insert(rng.randrange(2, len(verbs) + 1), idiom)
    return Lexicon(tuple(nouns), tuple(adjectives), tuple(verbs))


# ----------------------------------------------------------------------------------------------
# Sentence structure and its two renderings
