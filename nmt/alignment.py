"""Word alignments from attention: subword pieces -> words, Pharaoh `i-j` lines, soft matrices, AER.

Word indices count whitespace-separated words after detokenisation (0-based, source first), which
is what sentencepiece's `▁` word-start marker encodes: a new word starts at every piece that
begins with `▁` (and at the first piece). A word's attention over the source is the sum over its
source pieces, averaged over its target pieces; the hard alignment links each target word to the
source word it attends to most. The EOS row and column are dropped.
"""
from __future__ import annotations

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
    parts = [reduce(np.take(matrix, np.flatnonzero(idx == w), axis=axis), axis=axis)
             for w in range(n)]
    return np.stack(parts, axis=axis) if parts else np.zeros((0, 0))


def word_attention(attn: np.ndarray, src_pieces: list[str], tgt_pieces: list[str]) -> np.ndarray:
    """[target words, source words] soft alignment, rows summing to 1.

    attn: [len(tgt_pieces) + 1, len(src_pieces) + 1] attention over pieces, EOS row/col last."""
    a = np.asarray(attn, dtype=np.float64)[:len(tgt_pieces), :len(src_pieces)]
    if a.size == 0:
        return np.zeros((len(set(word_index(tgt_pieces))), len(set(word_index(src_pieces)))))
    a = _group(a, word_index(src_pieces), 1, np.sum)
    a = _group(a, word_index(tgt_pieces), 0, np.mean)
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


def alignment_error_rate(predicted: list[set[tuple[int, int]]],
                         sure: list[set[tuple[int, int]]]) -> float:
    """AER (Och & Ney 2003) with every gold link sure: 1 - 2|A & S| / (|A| + |S|)."""
    hits = sum(len(a & s) for a, s in zip(predicted, sure))
    total = sum(len(a) + len(s) for a, s in zip(predicted, sure))
    return 1.0 - 2.0 * hits / total if total else 0.0
