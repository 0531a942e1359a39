"""The page's example sentence: the first source line of the run's own test (else validation)
split, so the placeholder is in the language the model reads, whatever it was trained on."""

from __future__ import annotations

from itertools import islice
from typing import Optional

from nmt.config import DataConfig
from nmt.data import corpus
from nmt.data.directions import direction_data
from nmt.errors import NmtError


def example_sentence(data: DataConfig) -> Optional[str]:
    """The sentence, or None where the split is out of reach: a hub dataset (the server starts
    offline), local files that are not on this machine. A multilingual model's: its first
    direction's source sentence."""
    if data.directions:
        data = direction_data(data, data.directions[0])
    for role in ("test", "valid"):
        name = data.splits.get(role)
        if not name:
            continue
        try:
            if data.source == "synthetic":  # the generator, not the cached corpus: no write
                from nmt.data.synthetic import iter_pairs

                pairs = iter_pairs(data.synthetic, name, 1)
            elif data.source == "local":
                pairs = corpus.stream_split(data, role)
            else:
                return None
            first = [s.strip() for s, _ in islice(pairs, 5) if s.strip()]
        except (NmtError, OSError, UnicodeDecodeError, ValueError):
            continue
        if first:
            return first[0]
    return None
