"""Which target pieces each language's training text uses: the vocabulary a language may write.

A multilingual model with one joint vocabulary can write any language's pieces into any output;
asked for a direction it never trained on (zero-shot de -> fr), it mostly writes the language it
wrote most often with that source (English), and a decoder-side tag alone does not stop it.
Banning, while decoding into language L, every piece seen fewer than `min_count` times in L's
training text (`decode.language_vocab`) leaves the search only L's words: the first tokens are
then L's, and the decoder, conditioned on them, goes on in L. The counts are read from the run's
training data, like a fairseq dictionary's counts.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Optional

import sentencepiece as spm
import torch

from nmt.config import DataConfig
from nmt.data import corpus
from nmt.data.directions import direction_data, direction_names
from nmt.data.tokenizer import PieceCounts, Tokenizer
from nmt.errors import NmtError


def count_target_pieces(data: DataConfig, tok: Tokenizer) -> PieceCounts:
    """Every target language's piece counts over the training text of the first direction
    into it (every direction into a language reads the same text in a many-way corpus)."""
    first: dict[str, str] = {}  # target language -> the first direction into it
    for name, (_, tgt) in zip(direction_names(data), data.language_pairs()):
        first.setdefault(tgt, name)
    try:
        texts = {
            tgt: corpus.load_split(direction_data(data, name), "train")[1]
            for tgt, name in first.items()
        }
    except NmtError as e:
        raise NmtError(f"decode.language_vocab counts the training text's pieces: {e}") from None
    size = tok.tgt_vocab_size
    out: PieceCounts = {}
    for lang, lines in texts.items():
        seen = Counter(i for ids in tok.tgt.encode([_case(t, tok) for t in lines]) for i in ids)
        out[lang] = [seen.get(i, 0) for i in range(size)]
    return out


def check_min_count(tok: Tokenizer, min_count: int) -> None:
    """A one-line error when decode.language_vocab masks every ordinary piece of a target
    language: its output could only be empty."""
    control = _control_pieces(tok.tgt)
    for lang, counts in tok.piece_counts.items():
        most = max((c for c, ctl in zip(counts, control.tolist()) if not ctl), default=0)
        if most < min_count:
            raise NmtError(
                f"decode.language_vocab {min_count} leaves no piece to write in '{lang}': its "
                f"most frequent piece is seen {most} times in its training text, so every "
                f"translation would be empty; use at most {most}"
            )


def _case(text: str, tok: Tokenizer) -> str:
    return text.lower() if tok.lowercase else text


def masked_pieces(tok: Tokenizer, min_count: int) -> Optional[torch.Tensor]:
    """The [V] mask of target ids to mask when `tok` (a multilingual model's view for one
    target language, or a one-direction model's tokenizer) writes its language: pieces seen
    fewer than `min_count` times in that language's training text, by `tok.piece_counts`
    (never EOS or another control piece: a target-mode tag is forced, never chosen); None when
    `min_count` is 0."""
    if min_count <= 0:
        return None
    counts = tok.piece_counts
    lang = tok.direction[0] if tok.direction else next(iter(counts), None)
    if lang not in counts:
        known = ", ".join(sorted(counts)) or "none: load the model with nmt.inference"
        raise NmtError(
            f"decode.language_vocab: no piece counts for target language '{lang}' "
            f"(counted: {known})"
        )
    return (torch.tensor(counts[lang]) < min_count) & ~_control_pieces(tok.tgt)


@functools.lru_cache(maxsize=4)
def _control_pieces(sp: spm.SentencePieceProcessor) -> torch.Tensor:
    """[V] bool: the target vocabulary's control pieces (specials and tags), found once per
    processor: every call of `masked_pieces` (each request of a server) would otherwise ask
    sentencepiece about every piece again, ~7 ms for 8,000 pieces."""
    return torch.tensor([sp.is_control(i) for i in range(sp.get_piece_size())])
