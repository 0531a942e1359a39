"""What each sentencepiece piece of a sentence covers in the input, for labels people read.

sentencepiece reports a piece's surface text (the input characters it stands for, so an unknown
word keeps its spelling) only in its SentencePieceText proto; the Python package decodes that
through protobuf, which we do not depend on, so the few fields needed are read off the wire.
"""

from __future__ import annotations

MARKER = "\u2581"  # sentencepiece's word-boundary marker


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes):
    """(field number, value) of a protobuf message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i : i + size], i + size
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        yield field, value


def surfaces(sp, text: str) -> list[str]:
    """The input text each piece of `sp.encode(text)` covers, stripped of spaces; a piece that
    covers only a space (the bare marker) gets the marker-free piece text, which is empty."""
    out = []
    for field, piece in _fields(sp.encode(text, out_type="serialized_proto")):
        if field != 2:  # SentencePieceText.pieces
            continue
        parts = dict(_fields(piece))  # 1 piece, 2 id, 3 surface, 4 begin, 5 end
        out.append(parts.get(3, b"").decode("utf-8").strip())
    return out


def display(piece: str) -> str:
    """A piece without the word-boundary marker ("\u2581the" -> "the")."""
    return piece.replace(MARKER, "")
