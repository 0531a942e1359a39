"""One reason to stop that every rank acts on: signals caught, limits checked, and under DDP the
strongest reason on any rank shared by all, so all ranks take the same way out of the run."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from nmt.config import Config
from nmt.training.distributed import DistInfo, all_reduce_max
from nmt.training.stopping import STOP_CODES, Stop, stop_decision


class StopAgreement:
    """Holds the signal this rank caught and the stop codes the ranks agreed on in the last
    step's read (2: a signal, 1: a limit, 0: go on); `interrupted` when a signal stopped the run
    on any rank (checkpointed, unfinished)."""

    def __init__(self, cfg: Config, dist: DistInfo) -> None:
        self.cfg, self.dist = cfg, dist
        self.signal: Optional[str] = None
        self.agreed = 0  # the code all ranks agreed on in the last step's read
        self.own = 0  # this rank's own code in that read
        self.interrupted = False

    def decide(self, step: int, epoch: int, **facts: Any) -> Optional[Stop]:
        """`stop_decision` on this rank's step and epoch plus the facts given."""
        return stop_decision(self.cfg, step=step, epoch=epoch, **facts)

    @contextmanager
    def catching_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM set `signal` (the loop stops at the next check) instead of killing."""
        old = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                old[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread (e.g. called from a test thread)
                pass
        try:
            yield
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.signal = signal.Signals(signum).name

    def local_code(self, step: int, epoch: int, minutes: float) -> int:
        """2: a signal arrived; 1: a limit is reached; 0: go on (this rank's view)."""
        stop = self.decide(step, epoch, signal=self.signal, minutes=minutes)
        return 0 if stop is None else STOP_CODES[stop.kind]

    def heard(self, agreed: int, own: int) -> None:
        """The codes of a step's read: the ranks' strongest and this rank's own."""
        self.agreed, self.own = agreed, own

    def check(
        self, step: int, epoch: int, minutes: float, after_step: bool = False
    ) -> Optional[str]:
        """Why to stop now, if at all: a signal or a limit. Ranks decide together (the strongest
        reason on any rank wins), so all of them take the same path to the end of the run."""
        if self.dist.world > 1 and after_step:
            return self._agreed_after_step(step, epoch, minutes)
        stop = self.decide(step, epoch, signal=self.signal, minutes=minutes)
        code, reason = (0, None) if stop is None else (STOP_CODES[stop.kind], stop.reason)
        if self.dist.world > 1:
            agreed = all_reduce_max(code, self.dist.device)
            if agreed > code:
                reason = _elsewhere(agreed)
            code = agreed
        self.interrupted = code == 2
        return reason

    def _agreed_after_step(self, step: int, epoch: int, minutes: float) -> Optional[str]:
        """After a step under DDP: the ranks agreed on signals and time budgets in that step's
        read (no extra round trip); the step limit is the same on every rank."""
        if self.agreed == 0:
            stop = self.decide(step, epoch)
            return stop.reason if stop else None
        self.interrupted = self.agreed == 2
        if self.agreed > self.own:
            return _elsewhere(self.agreed)
        stop = self.decide(step, epoch, signal=self.signal, minutes=minutes)
        return stop.reason if stop else f"reached max_minutes={self.cfg.train.max_minutes:g}"


def _elsewhere(code: int) -> str:
    return "interrupted on another rank" if code == 2 else "a limit was reached on another rank"
