"""Encoding and filtering the training split's rows, a batch at a time in `Dataset.map`'s
workers: subword ids, token counts and the filter decision of each pair (`nmt.data.prepared`
writes what this returns). A multilingual row also carries its direction: its language tag goes
first on the side `data.tag` names, and the length filter counts the sentence without it, so both
tag modes keep the same pairs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional

from nmt.data.tokenizer import Tokenizer

KEEP, EMPTY, TOO_LONG, RATIO = 0, 1, 2, 3  # the filter decision stored per pair


@dataclass
class FilterStats:
    total: int = 0
    kept: int = 0
    empty: int = 0
    too_long: int = 0
    ratio: int = 0

    def line(self) -> str:
        return (
            f"train pairs: {self.total} read, {self.kept} kept, dropped {self.empty} empty, "
            f"{self.too_long} over max_len, {self.ratio} over max_ratio"
        )


_TOKENIZERS: dict[bytes, Tokenizer] = {}


def _decision(s_text: str, t_text: str, ls: int, lt: int, max_len: int, max_ratio: float) -> int:
    if not s_text.strip() or not t_text.strip() or ls == 0 or lt == 0:
        return EMPTY
    if ls > max_len or lt > max_len:
        return TOO_LONG
    if max(ls, lt) / min(ls, lt) > max_ratio:
        return RATIO
    return KEEP


def encode_rows(
    rows: dict,
    src_proto: bytes,
    tgt_proto: Optional[bytes],
    lowercase: bool,
    max_len: int,
    max_ratio: float,
    tags: Optional[list[int]] = None,
    tag_side: str = "source",
) -> dict:
    """One batch of rows -> ids, lengths and the filter decision (runs in the map workers).
    `tags[k]`: the tag id of direction k's target language, for rows with a `dir` column."""
    key = hashlib.sha1(src_proto + (tgt_proto or b"")).digest() + bytes([lowercase])
    tok = _TOKENIZERS.get(key) or _TOKENIZERS.setdefault(
        key, Tokenizer(src_proto, tgt_proto, lowercase)
    )
    src, tgt = tok.encode_src(rows["src"]), tok.encode_tgt(rows["tgt"])
    drop = [
        _decision(s_text, t_text, len(s) - 1, len(t), max_len, max_ratio)  # sources end in EOS
        for s_text, t_text, s, t in zip(rows["src"], rows["tgt"], src, tgt)
    ]
    if tags is not None:
        side = src if tag_side == "source" else tgt
        for i, k in enumerate(rows["dir"]):
            side[i] = [tags[k]] + side[i]
    out = {"src": src, "tgt": tgt, "src_len": [len(s) for s in src]}
    out.update(tgt_len=[len(t) for t in tgt], drop=drop)
    if tags is not None:
        out["dir"] = rows["dir"]
    return out


def id_features(ds, vocab: int, directions: bool = False):
    """The Arrow schema of encoded rows (`ds`: the `datasets` module); `dir` with directions."""
    seq = getattr(ds, "List", None) or ds.Sequence
    ids = ds.Value("uint16" if vocab <= 1 << 16 else "int32")
    columns = {
        "src": seq(ids),
        "tgt": seq(ids),
        "src_len": ds.Value("int32"),
        "tgt_len": ds.Value("int32"),
        "drop": ds.Value("int8"),
    }
    if directions:
        columns["dir"] = ds.Value("int16")
    return ds.Features(columns)
