"""Multilingual Marian models: their `>>fra<<` target-language tokens as nmt's `<2fra>` tags.

A multilingual OPUS-MT model (Helsinki-NLP/opus-mt-en-ROMANCE, opus-mt-en-mul, ...) has one
vocab.json entry `>>code<<` per target language. MarianTokenizer splits such a token off the
front of a source text (">>fra<< Hello") and looks it up in vocab.json, so it is the first source
id, before the sentencepiece pieces: nmt's `data.tag: source`. The import renames each entry to
the tag `<2code>` and makes it a control piece of both rewritten sentencepiece models
(nmt.importers.spm_order), so `Tokenizer.tags` lists the languages and encoding for `code` puts
Marian's id first.

A tag keeps the code as the model spells it (`>>fra<<` -> `<2fra>`, `>>pt_BR<<` -> `<2pt_BR>`):
OPUS-MT mixes two-letter codes with regional variants (en-ROMANCE: fr, fr_BE, pt_br, pt_BR) and
three-letter ones with scripts (en-mul: fra, srp_Cyrl, cmn_Hans). Mapping fra to fr would need an
ISO table and is not one-to-one (zho, cmn_Hans and cmn_Hant are all "zh"), while the model's own
spelling is what its model card lists and what an export writes back.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from nmt.config.load import LANGUAGE
from nmt.data.tokenizer import tag_piece
from nmt.errors import NmtError

CODE = re.compile(r">>(.+)<<")  # MarianTokenizer's language token, as vocab.json spells it
DIRECTIONS_KEY = "nmt_directions"  # config.json: the directions our export was trained for


def marian_code(lang: str) -> str:
    """The vocab.json token of language `lang` (the export's spelling of tag <2lang>)."""
    return f">>{lang}<<"


def language_codes(vocab: dict[str, int]) -> list[str]:
    """The language codes of a vocabulary's `>>code<<` tokens, in id order."""
    found = sorted((i, m.group(1)) for p, i in vocab.items() if (m := CODE.fullmatch(p)))
    return [code for _, code in found]


def rename_codes(pieces: list[str], codes: list[str]) -> list[str]:
    """`pieces` with each `>>code<<` of `codes` renamed to its tag `<2code>`; a code that cannot
    name a tag, or a tag the vocabulary already has as a piece, is one error line."""
    for code in codes:
        if not LANGUAGE.fullmatch(code):
            raise NmtError(
                f"the vocabulary's language token {marian_code(code)!r} has a code nmt cannot "
                f"name as a language tag (letters, digits and '_', starting with a letter)"
            )
        if tag_piece(code) in pieces:
            raise NmtError(
                f"the vocabulary has both {marian_code(code)!r} and {tag_piece(code)!r}; "
                f"nmt names the language token {tag_piece(code)!r}"
            )
    renamed = {marian_code(c): tag_piece(c) for c in codes}
    return [renamed.get(p, p) for p in pieces]


def source_language(tokenizer_lang: Optional[str], model: str) -> str:
    """The source language key of a multilingual model's directions: the tokenizer's
    `source_lang`, else the one an OPUS-MT name gives (opus-mt-en-ROMANCE: en), else `src`."""
    if tokenizer_lang and LANGUAGE.fullmatch(tokenizer_lang):
        return tokenizer_lang
    name = model.rstrip("/").rsplit("/", 1)[-1]
    parts = name.split("-")
    if name.startswith("opus-mt-") and len(parts) >= 4 and LANGUAGE.fullmatch(parts[-2]):
        return parts[-2]
    return "src"


def data_section(config: Any, codes: list[str], src: str) -> dict:
    """The imported config's `data` keys of a multilingual model: `tag: source` and its
    directions, src -> each language (the trained ones where our own export recorded them)."""
    stored = getattr(config, DIRECTIONS_KEY, None)
    ok = isinstance(stored, list) and all(isinstance(d, str) for d in stored)
    if ok and stored and {d.partition("-")[2] for d in stored} <= set(codes):
        return {"directions": list(stored), "tag": "source"}
    # a code that is the source language itself names no direction (nmt refuses xx-xx)
    return {"directions": [f"{src}-{c}" for c in codes if c != src], "tag": "source"}
