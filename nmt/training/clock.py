"""Seconds of training, on a clock a test can replace."""

from __future__ import annotations

import time
from typing import Callable, Protocol


class HoldsSeconds(Protocol):
    train_seconds: float


class TrainClock:
    """Counts the seconds this process spends training. Each `tick` adds the time since the last
    one to `progress.train_seconds`, which checkpoints carry, so that total sums every run of a
    resumed training; `run_minutes` counts this run alone (what `train.max_minutes` limits).
    The time between a kill and its resume is never counted: the clock starts with `start`."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self.last: float | None = None
        self.run_seconds = 0.0

    def start(self) -> None:
        self.last = self.now()

    def tick(self, progress: HoldsSeconds) -> None:
        now = self.now()
        if self.last is not None:
            progress.train_seconds += now - self.last
            self.run_seconds += now - self.last
        self.last = now

    def run_minutes(self) -> float:
        return self.run_seconds / 60
