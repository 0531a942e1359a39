"""A sentencepiece model whose own ids follow a given vocabulary (Marian's vocab.json).

Marian segments text with sentencepiece but looks the pieces up in its own vocabulary, whose ids
are not the sentencepiece model's. Rewriting the model's piece list in the vocabulary's order makes
sentencepiece emit those ids directly, so the rest of nmt (batching, prepared corpora, decoding,
CTranslate2 export) keeps one tokenizer. Pieces of the vocabulary the model cannot produce (the
other side's pieces of a joint vocabulary) become UNUSED: sentencepiece never emits them when
encoding but still decodes them. Pieces named as control pieces (a multilingual model's language
tags, nmt.importers.languages) become CONTROL: one id each, never produced from text, dropped when
decoding. The protobuf is edited on the wire (no protobuf dependency).
"""

from __future__ import annotations

import struct
from typing import Collection

from nmt.errors import NmtError
from nmt.pieces import _fields
from nmt.pieces import _varint as _read_varint

# SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
KEEP = (NORMAL, USER_DEFINED, BYTE)  # types a rewritten model keeps as they were
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")  # our ids 0-3 (nmt.data.tokenizer)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int32 values take ten bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, value: int | bytes | float) -> bytes:
    if isinstance(value, bytes):
        return _varint(num << 3 | 2) + _varint(len(value)) + value
    if isinstance(value, float):
        return _varint(num << 3 | 5) + struct.pack("<f", value)
    return _varint(num << 3) + _varint(value)


def _raw_fields(buf: bytes) -> list[tuple[int, bytes, bytes]]:
    """(field, raw encoding, payload of a length-delimited field) of each field of a message, to
    copy the fields we keep byte for byte."""
    out, i = [], 0
    while i < len(buf):
        start = i
        key, i = _read_varint(buf, i)
        wire, payload = key & 7, b""
        if wire == 0:
            _, i = _read_varint(buf, i)
        elif wire == 2:
            size, i = _read_varint(buf, i)
            payload, i = buf[i : i + size], i + size
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        out.append((key >> 3, buf[start:i], payload))
    return out


def model_pieces(proto: bytes) -> dict[str, tuple[float, int]]:
    """piece -> (score, type) of a serialized sentencepiece ModelProto."""
    out = {}
    for num, raw in _fields(proto):
        if num == 1:
            parts = dict(_fields(raw))
            score = struct.unpack("<f", parts[2])[0] if 2 in parts else 0.0
            out[parts[1].decode("utf-8")] = (score, parts.get(3, NORMAL))
    return out


def reorder(proto: bytes, vocab: list[str], control: Collection[str] = ()) -> bytes:
    """The model with piece i = vocab[i]. vocab[0:4] name our pad, unk, bos and eos slots (written
    as <pad>, <unk>, <s>, </s>: control pieces, never produced from text); a later piece is
    CONTROL if `control` names it, else keeps its score and type where the model has it, and is
    UNUSED where it does not."""
    if len(set(vocab)) != len(vocab):
        dup = next(p for i, p in enumerate(vocab) if p in vocab[:i])
        raise NmtError(f"the vocabulary lists piece {dup!r} twice")
    clash = [p for p in vocab[4:] if p in SPECIALS]
    if clash:
        raise NmtError(f"the vocabulary uses the special piece {clash[0]!r} as an ordinary piece")
    have = model_pieces(proto)
    pieces = []
    for i, name in enumerate(vocab):
        if i < 4:
            name, score, kind = SPECIALS[i], 0.0, UNKNOWN if i == 1 else CONTROL
        else:
            score, kind = have.get(name, (0.0, UNUSED))
            kind = CONTROL if name in control else kind if kind in KEEP else UNUSED
        entry = _field(1, name.encode("utf-8")) + _field(2, score) + _field(3, kind)
        pieces.append(_field(1, entry))
    out = bytearray(b"".join(pieces))
    for num, raw, payload in _raw_fields(proto):
        if num == 2:  # TrainerSpec: our special ids and piece names replace the model's
            spec = _raw_fields(payload)
            body = b"".join(r for n, r, _ in spec if n not in range(40, 49) or n == 44)
            body += b"".join(_field(40 + k, v) for k, v in enumerate((1, 2, 3, 0)))
            names = SPECIALS[1:] + SPECIALS[:1]  # unk, bos, eos, pad: fields 45-48
            body += b"".join(_field(45 + k, s.encode()) for k, s in enumerate(names))
            out += _field(2, body)
        elif num not in (1, 4):  # pieces are rewritten; self-test samples would not hold
            out += raw
    return bytes(out)
