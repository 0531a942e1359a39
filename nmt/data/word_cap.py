"""`data.train_max_words`: Bahdanau et al.'s (2014) -30 and -50 models, trained on the pairs of
at most 30 (50) words on both sides. Words are whitespace-separated tokens of the text as it is.

A capped config's prepared corpus also holds the words of each pair's longer side (words.npy,
one entry per pair read); the cap is applied when training opens the corpus. So every cap shares
one prepared corpus and one subword model, and models trained with different caps score their
per-token losses in the same pieces. Valid and test are never capped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from nmt.data.encode_rows import FilterStats
from nmt.errors import NmtError

WORDS_INDEX = "words"


def longer_side_words(text, batch_rows: int = 10000) -> np.ndarray:
    """The whitespace words of each pair's longer side, in corpus order (`text`: a
    `datasets.Dataset` with `src` and `tgt` columns)."""
    words = np.empty(len(text), dtype=np.int32)
    at = 0
    for rows in text.iter(batch_size=batch_rows):
        n = len(rows["src"])
        sides = zip(rows["src"], rows["tgt"])
        words[at : at + n] = [max(len(s.split()), len(t.split())) for s, t in sides]
        at += n
    return words


def save_words(out: Path, text) -> None:
    np.save(out / f"{WORDS_INDEX}.npy", longer_side_words(text))


@dataclass
class WordCapStats(FilterStats):
    """The filter's counts with the cap applied on top (`kept` counts the pairs it kept)."""

    max_words: int = 0
    over_words: int = 0

    def line(self) -> str:
        return super().line() + f", {self.over_words} over train_max_words ({self.max_words})"


def capped_stats(stats: FilterStats, max_words: int, over_words: int) -> WordCapStats:
    fields = {**asdict(stats), "kept": stats.kept - over_words}
    return WordCapStats(**fields, max_words=max_words, over_words=over_words)


def within_words(corpus: Any, max_words: int) -> Any:
    """The prepared corpus (`nmt.data.prepared.PreparedCorpus`) without the kept pairs that have
    more than `max_words` words on either side."""
    path = corpus.path / f"{WORDS_INDEX}.npy"
    if not path.is_file():
        raise NmtError(
            f"the prepared corpus {corpus.path} has no {path.name} for data.train_max_words; "
            f"delete it to re-prepare"
        )
    keep = np.load(path, mmap_mode="r")[corpus.kept] <= max_words
    direction = None if corpus.direction is None else corpus.direction[keep]
    meta = dict(corpus.meta)
    if direction is not None:  # each direction's kept pairs, after the cap
        sizes = np.bincount(direction, minlength=len(meta["directions"]))
        meta["directions"] = dict(zip(meta["directions"], map(int, sizes)))
    return replace(
        corpus,
        meta=meta,
        kept=corpus.kept[keep],
        src_len=corpus.src_len[keep],
        tgt_len=corpus.tgt_len[keep],
        direction=direction,
        max_words=max_words,
        over_words=int(keep.size - keep.sum()),
    )
