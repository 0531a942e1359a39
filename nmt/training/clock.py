"""Seconds of training, on a clock a test can replace."""

from __future__ import annotations

import time
from typing import Callable, Protocol


class HoldsSeconds(Protocol):
    train_seconds: float


class TrainClock:
    """Counts the seconds spent training. Each `tick` adds the time since the last one to
    `progress.train_seconds`, which checkpoints carry, so that total sums every process that
    trained the run (a resumed training included); `run_minutes` is that total as of the last
    tick, what `train.max_minutes` limits, so a resumed run stops where an uninterrupted one
    would (as fairseq's --stop-time-hours). The time between a kill and its resume is never
    counted: the clock starts with `start`."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self.last: float | None = None
        self.seconds = 0.0  # the run's training time at the last tick, earlier processes' too

    def start(self) -> None:
        self.last = self.now()

    def tick(self, progress: HoldsSeconds) -> None:
        now = self.now()
        if self.last is not None:
            progress.train_seconds += now - self.last
        self.last = now
        self.seconds = progress.train_seconds

    def run_minutes(self) -> float:
        return self.seconds / 60
