"""Several translation directions in one corpus (`data.directions`): each direction is a view of
the data section with its own pair of language keys, read by the one-direction code in
`nmt.data.corpus`; the training split is their concatenation, each pair knowing its direction.

With directions `[de-en, en-de, fr-en, en-fr]` and local text files, direction `fr-en` reads
`SPLIT.fr` and `SPLIT.en`: one line-aligned, many-way parallel corpus serves every direction. The
built-in synthetic corpus is three-way parallel in the same way: its languages `src`, `tgt` and
`alt` (`nmt.data.synthetic`) give directions such as `[src-tgt, alt-tgt, tgt-alt]`.
A config without directions has one direction, `src_lang-tgt_lang`, and reads exactly as before.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Optional

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


# ------------------------------------------------------------------ decoding: where to translate


def source_languages(data: DataConfig) -> list[str]:
    """The languages the model reads: every direction's source, sorted."""
    return sorted({s for s, _ in data.language_pairs()})


def target_languages(data: DataConfig) -> list[str]:
    """The languages the model writes (what `tgt_lang` accepts): every direction's target."""
    return sorted({t for _, t in data.language_pairs()})


def check_target(data: DataConfig, tgt_lang: Optional[str], field: str = "--tgt-lang") -> str:
    """The target language to decode into: required for a multilingual model (one line naming
    its languages when missing or unknown); a one-direction model takes its own or none."""
    targets = target_languages(data)
    if not data.directions:
        if tgt_lang is None or tgt_lang == data.tgt_lang:
            return data.tgt_lang
        raise NmtError(
            f"{field} {tgt_lang}: this model translates only into {data.tgt_lang} (it was "
            f"trained for {data.src_lang}-{data.tgt_lang})"
        )
    if tgt_lang is None:
        raise NmtError(f"this model translates into {', '.join(targets)}: give {field}")
    if tgt_lang not in targets:
        raise NmtError(
            f"{field} {tgt_lang}: this model translates into {', '.join(targets)}, not "
            f"{tgt_lang}{_tag_hint(tgt_lang, targets)}"
        )
    return tgt_lang


# A language tag typed where its key belongs: ours (<2fr>), Marian's (>>fra<<), mBART's (__fr__)
_TYPED_TAG = re.compile(r"<2(\w+)>|>>(\w+)<<|__(\w+)__")


def _tag_hint(value: str, targets: list[str]) -> str:
    """' (give the language key fr, not its tag)' when `value` is a target language's tag."""
    m = _TYPED_TAG.fullmatch(value.strip())
    key = next((g for g in m.groups() if g), None) if m else None
    return f" (give the language key {key}, not its tag)" if key in targets else ""


def check_source(data: DataConfig, src_lang: Optional[str], field: str = "--src-lang") -> None:
    """A source language the model was trained to read, if one is named."""
    sources = source_languages(data)
    if src_lang is not None and src_lang not in sources:
        raise NmtError(f"{field} {src_lang}: this model reads {', '.join(sources)}, not {src_lang}")


def check_direction(data: DataConfig, name: str, field: str = "--direction") -> tuple[str, str]:
    """(source, target) of a direction to decode: a trained one or, for a multilingual model,
    any zero-shot pair of a language it reads and one it writes."""
    pair = name.split("-")
    if len(pair) != 2 or not all(pair) or pair[0] == pair[1]:
        raise NmtError(f"{field} {name}: expected SRC-TGT of two languages, e.g. de-en")
    src, tgt = pair
    if not data.directions and (src, tgt) != (data.src_lang, data.tgt_lang):
        raise NmtError(
            f"{field} {name}: this model translates {data.src_lang}-{data.tgt_lang} only"
        )
    sources, targets = source_languages(data), target_languages(data)
    if src not in sources:
        raise NmtError(f"{field} {name}: this model reads {', '.join(sources)}, not {src}")
    if tgt not in targets:
        raise NmtError(
            f"{field} {name}: this model translates into {', '.join(targets)}, not {tgt}"
        )
    return src, tgt


def check_pivot(
    data: DataConfig, pivot: str, src: Optional[str], tgt: str, field: str = "--pivot"
) -> None:
    """A pivot language the model both writes and reads, neither end of the route; errors name
    `field` (the CLI's --pivot, the API's and the server's pivot)."""
    if not data.directions:
        raise NmtError(f"{field} {pivot}: a pivot needs a multilingual model (data.directions)")
    check_target(data, pivot, field)
    check_source(data, pivot, field)
    if pivot in (src, tgt):
        raise NmtError(f"{field} {pivot}: the pivot must differ from the source and the target")


def pair_data(data: DataConfig, src: str, tgt: str) -> DataConfig:
    """The data section of any pair of the corpus's languages, trained or zero-shot
    (`direction_data` takes trained directions only): SPLIT.src and SPLIT.tgt."""
    return replace(data, src_lang=src, tgt_lang=tgt, directions=[])


def target_tokenizer(data: DataConfig, tok: Tokenizer, tgt_lang: str) -> Tokenizer:
    """The tokenizer that decodes into `tgt_lang`: `tok` for a one-direction model, else its
    view for that language (whose target-mode tag `translate_texts` forces)."""
    return tok.for_direction(tgt_lang, data.tag) if data.directions else tok


def route(
    data: DataConfig,
    tok: Tokenizer,
    tgt_lang: Optional[str],
    src_lang: Optional[str] = None,
    pivot: Optional[str] = None,
    pivot_field: str = "--pivot",
) -> list[Tokenizer]:
    """One tokenizer per decoding pass into `tgt_lang`: the pivot's view first with `pivot`
    (src -> pivot -> tgt, each pass reading the one before), everything checked first."""
    tgt = check_target(data, tgt_lang)
    check_source(data, src_lang)
    if pivot is None:
        return [target_tokenizer(data, tok, tgt)]
    check_pivot(data, pivot, src_lang, tgt, pivot_field)
    return [target_tokenizer(data, tok, pivot), target_tokenizer(data, tok, tgt)]
