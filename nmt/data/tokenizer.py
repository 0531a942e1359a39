"""Sentencepiece subwords: trained once on the training split, saved with the run.

Special ids are fixed project-wide: PAD=0, UNK=1, BOS=2, EOS=3. Source sequences are encoded as
`pieces + [EOS]`; targets as bare pieces (the batcher adds BOS/EOS).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Iterable, Optional

import sentencepiece as spm

from nmt.config import VocabConfig
from nmt.errors import NmtError
from nmt.files import atomic_write

PAD, UNK, BOS, EOS = 0, 1, 2, 3

# Subword model file names in a run or prepared directory (this module writes and reads them).
JOINT_SUBWORDS = "spm.model"
SRC_SUBWORDS, TGT_SUBWORDS = "spm.src.model", "spm.tgt.model"
SUBWORD_GLOB = "spm*.model"


def subword_files(joint: bool) -> tuple[str, ...]:
    """File names of a directory's subword model(s): one joint model or source and target."""
    return (JOINT_SUBWORDS,) if joint else (SRC_SUBWORDS, TGT_SUBWORDS)


def _train_proto(lines: Iterable[str], cfg: VocabConfig, seed: int) -> bytes:
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
    ) -> "Tokenizer":
        """Load the configured models, or train new ones on the training text."""
        if cfg.joint:
            proto = (
                _read_model(cfg.model)
                if cfg.model
                else _train_proto(_lower(src_lines + tgt_lines, lowercase), cfg, seed)
            )
            return cls(proto, None, lowercase)
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

    def encode_src(self, texts: list[str]) -> list[list[int]]:
        return [ids + [EOS] for ids in self.src.encode(_lower(texts, self.lowercase))]

    def encode_tgt(self, texts: list[str]) -> list[list[int]]:
        return self.tgt.encode(_lower(texts, self.lowercase))

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        return [self.tgt.decode([i for i in seq if i > EOS]) for seq in ids]

    def src_pieces(self, ids: list[int]) -> list[str]:
        return [self.src.id_to_piece(i) if i != EOS else "</s>" for i in ids]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self.tgt.id_to_piece(i) if i != EOS else "</s>" for i in ids]


def _lower(texts: list[str], lowercase: bool) -> list[str]:
    return [t.lower() for t in texts] if lowercase else list(texts)
