"""The subword models of a prepared corpus: trained on a seeded sample of its training rows,
read from the dataset's Arrow files without mapping the whole corpus into memory."""

from __future__ import annotations

from typing import Optional

import numpy as np

from nmt.config import Config
from nmt.data.tokenizer import Tokenizer


def train_subwords(cfg: Config, text) -> Tokenizer:
    """Train (or load) the subword models on a seeded sample of at most vocab.max_sentences lines."""
    v, n = cfg.vocab, len(text)
    # a multilingual corpus: a tag for each target language, trained into (or checked in) the model
    tags = cfg.data.target_languages()
    kw = {"tags": tags} if tags else {}
    if v.model if v.joint else (v.src_model and v.tgt_model):
        return Tokenizer.build(v, [], [], cfg.data.lowercase, cfg.train.seed, **kw)
    pick = sample_rows(n, v.max_sentences, v.joint, cfg.train.seed)
    src, tgt = sample_text(text, pick)
    return Tokenizer.build(v, src, tgt, cfg.data.lowercase, cfg.train.seed, **kw)


def sample_text(text, pick: Optional[np.ndarray]) -> tuple[list[str], list[str]]:
    """The source and target lines of rows `pick` (all rows when None), and nothing else.

    The rows are read from the dataset's Arrow files with plain reads, batch by batch: random
    access to the memory-mapped table would touch nearly every page of the corpus (a 100k-row
    sample of 2M rows hits most 4 KB pages) and keep all of them in this process's RSS for the
    rest of the prepare. (`Dataset.select(pick).data` is no way out either: it is the whole table,
    with an index mapping beside it.)"""
    import pyarrow as pa

    files = [f["filename"] for f in text.cache_files]
    if pick is None or text._indices is not None or not files:  # small, or a hub split
        table = text.with_format("arrow")[pick if pick is not None else slice(None)]
        return table.column("src").to_pylist(), table.column("tgt").to_pylist()
    src: list[str] = []
    tgt: list[str] = []
    start = 0
    for name in files:
        with pa.OSFile(name) as f:
            reader = pa.ipc.open_stream(f)
            for batch in reader:
                lo, hi = np.searchsorted(pick, [start, start + batch.num_rows])
                if hi > lo:
                    rows = batch.select(["src", "tgt"]).take(pa.array(pick[lo:hi] - start))
                    src += rows.column(0).to_pylist()
                    tgt += rows.column(1).to_pylist()
                start += batch.num_rows
    if start != len(text) or len(src) != len(pick):
        raise RuntimeError(f"read {start} rows of {len(text)} from {files}")  # not a user's error
    return src, tgt


def sample_rows(n: int, max_sentences: int, joint: bool, seed: int) -> Optional[np.ndarray]:
    """The sorted rows (pairs) whose sentences train the subword models: a seeded sample of
    vocab.max_sentences lines (half from each side for a joint vocabulary), None for all rows.
    The same (n, max_sentences, joint, seed) gives the same rows on every run and machine."""
    rows = -(-max_sentences // 2) if joint else max_sentences  # joint: both sides count
    if rows >= n:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, rows, replace=False))
