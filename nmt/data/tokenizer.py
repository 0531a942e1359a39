"""Sentencepiece subwords: trained once on the training split, saved with the run.

Special ids are fixed project-wide: PAD=0, UNK=1, BOS=2, EOS=3. Source sequences are encoded as
`pieces + [EOS]`; targets as bare pieces (the batcher adds BOS/EOS).

A multilingual model (`data.directions`) has a language tag `<2xx>` for each target language,
trained into the joint model as a sentencepiece *control symbol*: one piece, never split, that
encoding text can never produce (a user who types "<2en>" gets those characters as text, not the
tag) and that decoding drops. The tags are read back from the model itself (`Tokenizer.tags`), so
a run's subword model says which target languages it has; `data.tag` says where the tag goes.
"""

from __future__ import annotations

import copy
import io
import re
import unicodedata
from functools import cached_property
from pathlib import Path
from typing import Iterable, Literal, Optional, Sequence

import sentencepiece as spm

from nmt.config import VocabConfig
from nmt.errors import NmtError
from nmt.files import atomic_write

PAD, UNK, BOS, EOS = 0, 1, 2, 3

# Subword model file names in a run or prepared directory (this module writes and reads them).
JOINT_SUBWORDS = "spm.model"
SRC_SUBWORDS, TGT_SUBWORDS = "spm.src.model", "spm.tgt.model"
SUBWORD_GLOB = "spm*.model"
TagMode = Literal["source", "target"]  # data.tag
PieceCounts = dict[str, list[int]]  # target language -> count of every target id
TAG = re.compile(r"<2([A-Za-z][A-Za-z0-9_]*)>")


def tag_piece(lang: str) -> str:
    """The piece that tells a multilingual model to translate into `lang`."""
    return f"<2{lang}>"


def subword_files(joint: bool) -> tuple[str, ...]:
    """File names of a directory's subword model(s): one joint model or source and target."""
    return (JOINT_SUBWORDS,) if joint else (SRC_SUBWORDS, TGT_SUBWORDS)


def _train_proto(
    lines: Iterable[str], cfg: VocabConfig, seed: int, tags: Sequence[str] = ()
) -> bytes:
    lines = [s for s in lines if s.strip()]
    if not lines:
        raise NmtError("cannot train a subword model: the training split has no non-empty lines")
    buf = io.BytesIO()
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=buf,
            vocab_size=cfg.size,
            model_type=cfg.type,
            character_coverage=cfg.character_coverage,
            pad_id=PAD,
            unk_id=UNK,
            bos_id=BOS,
            eos_id=EOS,
            input_sentence_size=cfg.max_sentences,
            shuffle_input_sentence=True,
            hard_vocab_limit=False,  # small corpora get a smaller vocabulary instead of an error
            max_sentence_length=1 << 16,
            num_threads=2,
            minloglevel=2,
            split_digits=True,
            byte_fallback=False,
            train_extremely_large_corpus=False,
            # control symbols, not user-defined ones: those would match "<2en>" typed in text
            **({"control_symbols": [tag_piece(t) for t in tags]} if tags else {}),
        )
    except RuntimeError as e:
        raise NmtError(f"sentencepiece training failed: {str(e).splitlines()[0]}") from None
    return buf.getvalue()


def _load_proto(proto: bytes) -> spm.SentencePieceProcessor:
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto)
    if (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) != (PAD, UNK, BOS, EOS):
        raise NmtError(
            "sentencepiece model must use pad=0, unk=1, bos=2, eos=3 (train it with "
            "--pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3)"
        )
    return sp


def _read_model(path: str) -> bytes:
    try:
        proto = Path(path).read_bytes()
    except OSError as e:
        raise NmtError(f"cannot read sentencepiece model {path}: {e.strerror}") from None
    try:
        _load_proto(proto)
    except NmtError as e:
        raise NmtError(f"{path}: {e}") from None
    except Exception:
        raise NmtError(f"{path} is not a valid sentencepiece model") from None
    return proto


class Tokenizer:
    """Source and target sentencepiece processors (the same one when the vocabulary is joint)."""

    def __init__(
        self, src_proto: bytes, tgt_proto: Optional[bytes] = None, lowercase: bool = False
    ) -> None:
        self.src_proto, self.tgt_proto = src_proto, tgt_proto
        self.lowercase = lowercase
        self.src = _load_proto(src_proto)
        self.tgt = self.src if tgt_proto is None else _load_proto(tgt_proto)
        # Target language -> each target id's count in its training text, where a decoding
        # option needs them (`nmt.data.language_pieces`); views share it.
        self.piece_counts: PieceCounts = {}

    @property
    def joint(self) -> bool:
        return self.tgt_proto is None

    @classmethod
    def build(
        cls,
        cfg: VocabConfig,
        src_lines: list[str],
        tgt_lines: list[str],
        lowercase: bool,
        seed: int,
        tags: Sequence[str] = (),
    ) -> "Tokenizer":
        """Load the configured models, or train new ones on the training text; `tags`: target
        languages whose tags the (joint) model must hold (trained in, or checked when given)."""
        if cfg.joint:
            proto = (
                _read_model(cfg.model)
                if cfg.model
                else _train_proto(_lower(src_lines + tgt_lines, lowercase), cfg, seed, tags)
            )
            tok = cls(proto, None, lowercase)
            tok.check_tags(tags, f"vocab.model {cfg.model}" if cfg.model else "the subword model")
            return tok
        src = (
            _read_model(cfg.src_model)
            if cfg.src_model
            else _train_proto(_lower(src_lines, lowercase), cfg, seed)
        )
        tgt = (
            _read_model(cfg.tgt_model)
            if cfg.tgt_model
            else _train_proto(_lower(tgt_lines, lowercase), cfg, seed)
        )
        return cls(src, tgt, lowercase)

    def save(self, run_dir: str | Path) -> list[Path]:
        run_dir = Path(run_dir)
        protos = (self.src_proto,) if self.joint else (self.src_proto, self.tgt_proto)
        files = dict(zip(subword_files(self.joint), protos))
        written = []
        for name, proto in files.items():
            atomic_write(run_dir / name, proto)
            written.append(run_dir / name)
        return written

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size()

    # (target language, tag mode) of a `DirectionView`; None: the model's own tokenizer
    direction: Optional[tuple[str, TagMode]] = None

    def encode_src(self, texts: list[str]) -> list[list[int]]:
        """Source ids ending in EOS."""
        return [ids + [EOS] for ids in self.src.encode(_lower(texts, self.lowercase))]

    def encode_tgt(self, texts: list[str]) -> list[list[int]]:
        """Target ids."""
        return self.tgt.encode(_lower(texts, self.lowercase))

    def forced_prefix(self) -> list[int]:
        """The target ids decoding forces before the text (a `DirectionView`'s tag in target
        mode; none here): what the target pieces and alignment rows shown to a user skip."""
        return []

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        """Text of target ids; specials and language tags are dropped."""
        tags = set(self.tags.values())
        return [self.tgt.decode([i for i in seq if i > EOS and i not in tags]) for seq in ids]

    # ------------------------------------------------------------------ language tags
    @cached_property
    def tags(self) -> dict[str, int]:
        """Target language -> id of its tag <2xx>: the model's control pieces of that form
        (empty for a one-direction model)."""
        sp = self.tgt
        found = {}
        for i in range(sp.get_piece_size()):
            m = TAG.fullmatch(sp.id_to_piece(i)) if sp.is_control(i) else None
            if m:
                found[m.group(1)] = i
        return found

    def tag_id(self, lang: str) -> int:
        """The id of `lang`'s tag, or one error line naming the languages this model has."""
        if lang not in self.tags:
            have = ", ".join(sorted(self.tags)) or "none: it was trained for one direction"
            raise NmtError(
                f"this model has no language tag for '{lang}' (target languages: {have})"
            )
        return self.tags[lang]

    def check_tags(self, langs: Iterable[str], where: str) -> None:
        """One error line unless the model holds a tag for every language in `langs`."""
        missing = [tag_piece(lang) for lang in langs if lang not in self.tags]
        if missing:
            raise NmtError(
                f"{where} has no language tag {', '.join(missing)} (data.directions needs one "
                f"control symbol per target language: train it with --control_symbols)"
            )

    def encode_source(self, texts: list[str], tgt_lang: str, tag: TagMode) -> list[list[int]]:
        """Source ids (ending in EOS) to translate into `tgt_lang`: its tag first in source
        mode; in target mode the source is untagged (the tag is the decoder's prefix)."""
        first = self.tag_id(tgt_lang)  # an unknown language fails in either mode
        ids = [x + [EOS] for x in self.src.encode(_lower(texts, self.lowercase))]
        return ids if tag == "target" else [[first] + x for x in ids]

    def encode_target(self, texts: list[str], tgt_lang: str, tag: TagMode) -> list[list[int]]:
        """Target ids of `tgt_lang` text as the model is trained on them: the target prefix
        (the tag in target mode, nothing in source mode), then the pieces."""
        prefix = self.target_prefix(tgt_lang, tag)
        return [prefix + x for x in self.tgt.encode(_lower(texts, self.lowercase))]

    def target_prefix(self, tgt_lang: str, tag: TagMode) -> list[int]:
        """The ids decoding must force first for `tgt_lang` (the `prefixes` of
        nmt.decode.translate_ids): [tag] in target mode, [] in source mode."""
        return [self.tag_id(tgt_lang)] if tag == "target" else []

    def for_direction(self, tgt_lang: str, tag: TagMode) -> "DirectionView":
        """This tokenizer's `DirectionView` for translating into `tgt_lang`."""
        self.tag_id(tgt_lang)
        return DirectionView(self, tgt_lang, tag)

    @cached_property
    def tgt_piece_texts(self) -> list[str]:
        """Every target id's piece as it spells text ("" for the specials and tags, which
        decoding drops)."""
        sp = self.tgt
        return [
            "" if sp.is_control(i) or sp.is_unknown(i) else sp.id_to_piece(i)
            for i in range(sp.get_piece_size())
        ]

    @cached_property
    def word_joiners(self) -> list[int]:
        """Target ids of the pieces that continue the word before them: no word-initial "▁", a
        letter or digit first, of a script written with spaces between words. Lexically
        constrained decoding allows none right after a phrase, so phrases are whole words."""
        sp = self.tgt
        return [
            i
            for i in range(sp.get_piece_size())
            if not (sp.is_unknown(i) or sp.is_control(i) or sp.is_unused(i) or sp.is_byte(i))
            and _continues_word(sp.id_to_piece(i))
        ]

    def src_pieces(self, ids: list[int]) -> list[str]:
        return [self.src.id_to_piece(i) if i != EOS else "</s>" for i in ids]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self.tgt.id_to_piece(i) if i != EOS else "</s>" for i in ids]


class DirectionView(Tokenizer):
    """A multilingual tokenizer for one direction: its `encode_src` and `encode_tgt` are
    `encode_source` and `encode_target` for `tgt_lang` (the tag where `tag` puts it), so code
    written for one direction (nmt.text_translation's translate_texts and score_pairs) runs
    unchanged. In target mode a caller must still force `forced_prefix` (translate_texts does
    with blank prefixes)."""

    def __init__(self, base: Tokenizer, tgt_lang: str, tag: TagMode) -> None:
        self.__dict__.update(copy.copy(base.__dict__))  # shares processors, tags, counts
        self.direction = (tgt_lang, tag)

    def encode_src(self, texts: list[str]) -> list[list[int]]:
        """Source ids ending in EOS, the tag first in source mode."""
        return self.encode_source(texts, *self.direction)

    def encode_tgt(self, texts: list[str]) -> list[list[int]]:
        """Target ids, the tag first in target mode."""
        return self.encode_target(texts, *self.direction)

    def forced_prefix(self) -> list[int]:
        """[tag] in target mode, [] in source mode."""
        return self.target_prefix(*self.direction)


# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer; CJK is told by
# width): there a piece after a phrase is a new word whatever it starts with.
UNSPACED = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF))


def spaced_word_character(c: str) -> bool:
    """A letter or digit of a script written with spaces between words: text glued to it on
    either side is part of its word (in CJK, Thai and the like, any character may end a word)."""
    return (
        c.isalnum()
        and unicodedata.east_asian_width(c) not in ("W", "F")
        and not any(lo <= ord(c) <= hi for lo, hi in UNSPACED)
    )


def _continues_word(piece: str) -> bool:
    return spaced_word_character(piece[:1]) if piece else False


def _lower(texts: list[str], lowercase: bool) -> list[str]:
    return [t.lower() for t in texts] if lowercase else list(texts)
