"""Word alignments from attention: subword pieces -> words, Pharaoh `i-j` lines, soft matrices, AER.

Word indices count whitespace-separated words after detokenisation (0-based, source first): a
piece belongs to the last word of the text that the pieces up to it decode to (so unknown words,
which sentencepiece marks without a word-start `▁`, still count as words). A word's attention over
the source is the sum over its source pieces, averaged over its target pieces; the hard alignment
links each target word to the source word it attends to most. The EOS row and column are dropped.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

WORD_START = "\u2581"


def word_index(pieces: list[str]) -> list[int]:
    """The word each piece belongs to (pieces without </s>)."""
    out, word = [], -1
    for i, p in enumerate(pieces):
        if i == 0 or p.startswith(WORD_START):
            word += 1
        out.append(word)
    return out


def _group(matrix: np.ndarray, index: list[int], axis: int, reduce) -> np.ndarray:
    n = index[-1] + 1 if index else 0
    idx = np.asarray(index)
    parts = [
        reduce(np.take(matrix, np.flatnonzero(idx == w), axis=axis), axis=axis) for w in range(n)
    ]
    return np.stack(parts, axis=axis) if parts else np.zeros((0, 0))


def word_index_by_decoding(ids: list[int], decode: Callable[[list[int]], str]) -> list[int]:
    """The word each token belongs to in decode(ids).split(), from the decoded prefixes."""
    return [max(len(decode(ids[: k + 1]).split()) - 1, 0) for k in range(len(ids))]


def word_index_by_words(ids: list[int], word_ids: list[list[int]], unk: int) -> Optional[list[int]]:
    """The word each token belongs to, from each word's own encoding `word_ids`; None when the
    sentence's tokens are not those encodings in a row. Consecutive unknown words that the
    subword model merged into one unknown token give it to the first of them."""
    out: list[int] = []
    for w, piece_ids in enumerate(word_ids):
        if ids[len(out) : len(out) + len(piece_ids)] == piece_ids:
            out += [w] * len(piece_ids)
        elif piece_ids == [unk] and out and ids[len(out) - 1] == unk:
            continue
        else:
            return None
    return out if len(out) == len(ids) else None


def word_attention(attn: np.ndarray, src_index: list[int], tgt_index: list[int]) -> np.ndarray:
    """[target words, source words] soft alignment, rows summing to 1.

    attn: [target pieces + 1, source pieces + 1] attention over pieces, EOS row/column last;
    src_index / tgt_index: the word of each piece (word_index or word_index_by_decoding)."""
    a = np.asarray(attn, dtype=np.float64)[: len(tgt_index), : len(src_index)]
    if a.size == 0:
        return np.zeros((0, 0))
    a = _group(a, src_index, 1, np.sum)
    a = _group(a, tgt_index, 0, np.mean)
    return a / np.maximum(a.sum(1, keepdims=True), 1e-12)


def words(pieces: list[str]) -> list[str]:
    """The detokenised words the pieces spell, in order."""
    out: list[str] = []
    for p, w in zip(pieces, word_index(pieces)):
        if w == len(out):
            out.append("")
        out[w] += p.replace(WORD_START, "")
    return out


def hard_alignment(word_attn: np.ndarray) -> list[tuple[int, int]]:
    """(source word, target word) pairs: each target word to its most attended source word."""
    if word_attn.size == 0:
        return []
    return [(int(i), j) for j, i in enumerate(word_attn.argmax(1))]


def pharaoh(pairs: list[tuple[int, int]]) -> str:
    return " ".join(f"{i}-{j}" for i, j in pairs)


def alignment_error_rate(
    predicted: list[set[tuple[int, int]]], sure: list[set[tuple[int, int]]]
) -> float:
    """AER (Och & Ney 2003) with every gold link sure: 1 - 2|A & S| / (|A| + |S|)."""
    hits = sum(len(a & s) for a, s in zip(predicted, sure))
    total = sum(len(a) + len(s) for a, s in zip(predicted, sure))
    return 1.0 - 2.0 * hits / total if total else 0.0
