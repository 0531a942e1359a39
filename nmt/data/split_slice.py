"""Split names with a slice, `datasets`' syntax, for local files too: `train[1000:]` trains on all
but the first 1,000 pairs and `train[:1000]` holds those out for validation.

The hub passes the name to `datasets` unchanged; local and built-in corpora are sliced here, as
their lines are read and checked, so an error still names the file's own line number.
"""

from __future__ import annotations

import re
from itertools import islice
from typing import Callable, Iterator, Optional, TypeVar

from nmt.errors import NmtError

T = TypeVar("T")

_SLICED = re.compile(r"^(?P<name>[^\[\]]+)\[(?P<start>-?\d*):(?P<stop>-?\d*)\]$")


def parse(name: str) -> tuple[str, Optional[slice]]:
    """('train', slice(1000, None)) for 'train[1000:]'; (name, None) for a name without a slice."""
    if "[" not in name and "]" not in name:
        return name, None
    m = _SLICED.match(name)
    if m is None:
        raise NmtError(
            f"data.splits: cannot read the split '{name}': expected NAME[START:STOP] with whole "
            "numbers (either may be empty or negative), e.g. train[1000:] or train[:1000]"
        )
    start, stop = (int(m[k]) if m[k] else None for k in ("start", "stop"))
    return m["name"], slice(start, stop)


def take(items: list[T], part: Optional[slice]) -> list[T]:
    return items if part is None else items[part]


def take_stream(make: Callable[[], Iterator[T]], part: Optional[slice]) -> Iterator[T]:
    """The sliced part of the stream `make()` returns; a negative bound costs one extra pass to
    count the items (the corpus is still never held in memory)."""
    if part is None:
        return make()
    start, stop = part.start, part.stop
    if (start or 0) < 0 or (stop or 0) < 0:
        start, stop, _ = part.indices(sum(1 for _ in make()))
    return islice(make(), start, stop)
