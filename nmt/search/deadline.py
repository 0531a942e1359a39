"""A time limit that stops a search where it runs: greedy and beam search check it before every
decoding step, so a call past its deadline ends within one step (a few milliseconds to a
fraction of a second) instead of running to the end of its batch.

The deadline is set for a block of code on the calling thread (`within`), not passed down
through every layer between the server's worker and the search loops, the way `torch.no_grad`
scopes a setting; outside such a block `check` costs one context-variable read.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Optional

from nmt.errors import NmtError

_DEADLINE: ContextVar[Optional[float]] = ContextVar("nmt_search_deadline", default=None)


class DeadlinePassed(NmtError):
    """The search was stopped at its deadline (`within`); nothing it decoded is returned."""


@contextmanager
def within(seconds: Optional[float]) -> Iterator[None]:
    """Searches in this block stop with DeadlinePassed once `seconds` (from now) have passed;
    None: no limit. A block inside another keeps the earlier of the two deadlines."""
    if seconds is None:
        yield
        return
    at = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(at if outer is None else min(at, outer))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check() -> None:
    """Raise DeadlinePassed if this thread's deadline (`within`) has passed."""
    at = _DEADLINE.get()
    if at is not None and time.monotonic() > at:
        raise DeadlinePassed(
            f"stopped at the time limit ({time.monotonic() - at:.2f} s past it); "
            f"send fewer or shorter sentences, or allow more time"
        )
