"""From config to training-ready ids: load splits, build subwords, filter the training split."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from nmt.config import Config
from nmt.data.corpus import load_split
from nmt.data.tokenizer import Tokenizer
from nmt.errors import NmtError



@dataclass
class FilterStats:
    total: int = 0
    kept: int = 0
    empty: int = 0
    too_long: int = 0
    ratio: int = 0

    def line(self) -> str:
        return (f"train pairs: {self.total} read, {self.kept} kept, dropped {self.empty} empty, "
                f"{self.too_long} over max_len, {self.ratio} over max_ratio")


@dataclass
class Prepared:
    tokenizer: Tokenizer
    train_src: list[list[int]]
    train_tgt: list[list[int]]
    stats: FilterStats


def filter_pairs(src: list[list[int]], tgt: list[list[int]], src_text: list[str],
                 tgt_text: list[str], max_len: int, max_ratio: float
                 ) -> tuple[list[int], FilterStats]:
    """Indices of training pairs to keep: non-empty, within max_len, within the length ratio."""
    st = FilterStats(total=len(src))
    keep = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        ls, lt = len(s) - 1, len(t)  # source ids end in EOS
        if not src_text[i].strip() or not tgt_text[i].strip() or ls == 0 or lt == 0:
            st.empty += 1
        elif ls > max_len or lt > max_len:
            st.too_long += 1
        elif max(ls, lt) / min(ls, lt) > max_ratio:
            st.ratio += 1
        else:
            keep.append(i)
    st.kept = len(keep)
    return keep, st


def prepare(cfg: Config, tokenizer: Optional[Tokenizer] = None) -> Prepared:
    """Load the training split, build (or reuse) the tokenizer, encode and filter training pairs."""
    src_text, tgt_text = load_split(cfg.data, "train")
    if tokenizer is None:
        tokenizer = Tokenizer.build(cfg.vocab, src_text, tgt_text, cfg.data.lowercase,
                                    cfg.train.seed)
    src_ids, tgt_ids = tokenizer.encode_src(src_text), tokenizer.encode_tgt(tgt_text)
    keep, stats = filter_pairs(src_ids, tgt_ids, src_text, tgt_text, cfg.data.max_len,
                               cfg.data.max_ratio)
    if not keep:
        raise NmtError(f"the training set is empty after filtering ({stats.line()}); check "
                       f"'data.max_len' and 'data.max_ratio'")
    return Prepared(tokenizer, [src_ids[i] for i in keep], [tgt_ids[i] for i in keep], stats)
