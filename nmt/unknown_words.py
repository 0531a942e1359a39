"""Source words the model's vocabulary does not know, reported before decoding.

A word the subword model cannot spell becomes `<unk>` (a word vocabulary even merges a run of
unknown words into one), so a translation of mostly unknown words looks plausible and is
nonsense. `translate` and `evaluate` say so (once with the count and share, or per line); the
Python API and the server return each text's unknown words in its warnings.
"""

from __future__ import annotations

import logging

from nmt.data.tokenizer import UNK, Tokenizer

log = logging.getLogger("nmt")


def unknown_words(tok: Tokenizer, texts: list[str]) -> list[list[str]]:
    """Per text, its whitespace-separated words that encode to at least one `<unk>` piece.

    Sentencepiece never joins pieces across whitespace, so a word encodes alone exactly as it
    does inside its sentence."""
    words = [t.split() for t in texts]
    flat = [w for ws in words for w in ws]
    unknown = iter([UNK in ids for ids in tok.encode_src(flat)] if flat else [])
    return [[w for w in ws if next(unknown)] for ws in words]


def describe_unknown(text: str, words: list[str]) -> str:
    """One text's unknown words as a warning (the API's, the server's and `--verbose`'s)."""
    return (
        f"{len(words)} of {len(text.split())} words are not in the model's vocabulary: "
        f"{' '.join(words)}"
    )


def warn_unknown(
    tok: Tokenizer, texts: list[str], where: str, verbose: bool = False, first_line: int = 1
) -> int:
    """Log one warning with the count and share of unknown source words (with `verbose`, one
    per line that has any, naming them); return the count."""
    found = unknown_words(tok, texts)
    n_unknown = sum(map(len, found))
    if not n_unknown:
        return 0
    if verbose:
        for i, (text, ws) in enumerate(zip(texts, found), first_line):
            if ws:
                log.warning(f"{where} line {i}: {describe_unknown(text, ws)}")
    if not verbose or len(texts) > 1:
        total = sum(len(t.split()) for t in texts)
        share = 100 * n_unknown / total
        log.warning(
            f"{where}: {n_unknown} of {total} source words ({share:.1f}%) are not in the "
            f"model's vocabulary and are translated as <unk>"
            + ("" if verbose else "; --verbose names them line by line")
        )
    return n_unknown
