"""Several translation directions in one corpus (`data.directions`): each direction is a view of
the data section with its own pair of language keys, read by the one-direction code in
`nmt.data.corpus`; the training split is their concatenation, each pair knowing its direction.

With directions `[de-en, en-de, fr-en, en-fr]` and local text files, direction `fr-en` reads
`SPLIT.fr` and `SPLIT.en`: one line-aligned, many-way parallel corpus serves every direction.
A config without directions has one direction, `src_lang-tgt_lang`, and reads exactly as before.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterator

from nmt.config import DataConfig
from nmt.data import corpus
from nmt.data.tokenizer import Tokenizer
from nmt.errors import NmtError


def direction_names(data: DataConfig) -> list[str]:
    """'src-tgt' of every direction, in config order (one for a one-direction config)."""
    return [f"{s}-{t}" for s, t in data.language_pairs()]


def direction_data(data: DataConfig, name: str) -> DataConfig:
    """The data section of one direction ('de-en'): its language keys, no `directions`, so
    `corpus.load_split` and `corpus.stream_split` read it like a one-direction corpus."""
    names = direction_names(data)
    if name not in names:
        raise NmtError(f"no direction '{name}' in this corpus (directions: {', '.join(names)})")
    src, tgt = data.language_pairs()[names.index(name)]
    return replace(data, src_lang=src, tgt_lang=tgt, directions=[])


def load_directions(data: DataConfig, role: str) -> dict[str, corpus.Pairs]:
    """Direction name -> (source lines, target lines) of the split with this role."""
    if not data.directions:
        return {direction_names(data)[0]: corpus.load_split(data, role)}
    return {name: corpus.load_split(direction_data(data, name), role) for name in data.directions}


def stream_directions(data: DataConfig, role: str) -> Iterator[tuple[str, str, int]]:
    """(source, target, direction index) of every direction's pairs, one direction after the
    other, each checked line by line as it is read."""
    for k, name in enumerate(data.directions):
        for s, t in corpus.stream_split(direction_data(data, name), role):
            yield s, t, k


def direction_files(data: DataConfig, role: str) -> list[Path]:
    """The local files the split is read from, over every direction, each once."""
    if not data.directions:
        return corpus.split_files(data, role)
    files = [
        p for name in data.directions for p in corpus.split_files(direction_data(data, name), role)
    ]
    return list(dict.fromkeys(files))


def direction_tokenizer(data: DataConfig, tok: Tokenizer, name: str) -> Tokenizer:
    """The tokenizer that encodes direction `name` ('de-en') as the run was trained on it:
    `tok` itself for a one-direction run, else its view for the target language and `data.tag`
    (`Tokenizer.for_direction`; in target mode decoding must force `tok.target_prefix`)."""
    _, tgt = direction_data(data, name).language_pairs()[0]
    return tok.for_direction(tgt, data.tag) if data.directions else tok
