"""Excluded (negative) phrases as text: a model can spell a word with pieces other than the ones
its tokenizer would choose ("holding" as "▁hold" "ing" or "▁hol" "ding"), so excluding a phrase's
own pieces (`nmt.search.constraints`) does not keep it out of the output. Here a phrase is
matched on the text the pieces spell, as whole words: the tokens that would complete it, right
after a word boundary (a space, the start of the output, or a character that is not a letter or
digit) and followed by the end of the token or such a character, are excluded, whatever pieces
came before. A phrase with no text (only pieces that spell nothing) is never matched: it would
match every word boundary.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Sequence

WORD_START = "\u2581"  # sentencepiece's word-initial marker: a space in the text


class PieceText:
    """A target vocabulary's pieces as text, indexed to find the pieces that start with a
    string."""

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = list(pieces)
        self._ids = sorted(range(len(self.pieces)), key=self.pieces.__getitem__)
        self._sorted = [self.pieces[i] for i in self._ids]
        self._cache: dict[str, list[int]] = {}

    def text(self, ids: Sequence[int]) -> str:
        return "".join(self.pieces[i] for i in ids)

    def ending_word(self, s: str) -> list[int]:
        """Ids of the pieces that start with `s` and end there or go on with a character that is
        not a letter or digit: after them, the word `s` ends in has ended."""
        if s not in self._cache:
            lo, hi = bisect_left(self._sorted, s), bisect_left(self._sorted, s + "\U0010ffff")
            self._cache[s] = [
                self._ids[j]
                for j in range(lo, hi)
                if len(self._sorted[j]) == len(s) or not self._sorted[j][len(s)].isalnum()
            ]
        return self._cache[s]


def pattern(pieces: PieceText, phrase: Sequence[int]) -> str:
    """An excluded phrase's text, words joined by the marker, without the leading one."""
    return pieces.text(phrase).lstrip(WORD_START)


def completing_tokens(pieces: PieceText, tail: str, whole: bool, phrase: str) -> list[int]:
    """The tokens that would complete `phrase` (a `pattern`) as whole words after a hypothesis
    whose text ends with `tail` (`whole`: the tail is all of it, so its start is a boundary;
    otherwise it is at least one character longer than the phrase); none for an empty phrase."""
    if not phrase:
        return []
    out = list(pieces.ending_word(WORD_START + phrase))  # a new word that is the phrase
    n = len(tail)
    for k in range(len(phrase)):  # the tail ends with the phrase's first k characters
        start = n - k
        if start < 0 or (k and not tail.endswith(phrase[:k])):
            continue
        if (start == 0 and whole) or (start > 0 and not tail[start - 1].isalnum()):
            out += pieces.ending_word(phrase[k:])
    return out
