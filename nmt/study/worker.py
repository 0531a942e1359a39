"""A study's worker processes: models trained side by side, each in a process of its own that
stops with the study (even one killed by SIGKILL) and takes no queued model after it."""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from typing import Any, Callable, Optional

log = logging.getLogger("nmt")

_stop = None  # in a worker process: set by the study when another model has failed
_study_pid: Optional[int] = None  # in a worker process: the study's process
_orphaned = False  # in a worker process: the study's parent-death signal has arrived


def _init(stop, study_pid: int) -> None:
    global _stop, _study_pid
    _stop, _study_pid = stop, study_pid
    _stop_with_the_study()


def study_is_gone() -> bool:
    # The flag, not only getppid(): some kernels (sandboxes) reparent the orphan a moment after
    # they deliver the parent-death signal, and a worker that asked then took a queued model.
    return _orphaned or (_study_pid is not None and os.getppid() != _study_pid)


def _on_study_death(_signum: int, _frame: Any) -> None:
    global _orphaned
    _orphaned = True
    signal.raise_signal(signal.SIGTERM)  # a model in training saves a checkpoint and stops


def _stop_with_the_study() -> None:
    """SIGTERM this worker when the study's process dies, even by SIGKILL: Linux's parent-death
    signal (SIGUSR1, so the worker knows why) marks the study gone and raises SIGTERM. A model in
    training then saves a checkpoint and stops, where it would otherwise train on, unseen,
    beside the next run of the study."""
    if sys.platform.startswith("linux"):
        signal.signal(signal.SIGUSR1, _on_study_death)
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        if libc.prctl(ctypes.c_int(pr_set_pdeathsig), ctypes.c_ulong(signal.SIGUSR1)) != 0:
            log.warning(f"study worker: prctl failed ({os.strerror(ctypes.get_errno())})")
    if study_is_gone():  # the study died before the line above took effect
        os.kill(os.getpid(), signal.SIGTERM)


def stop_requested() -> bool:
    """In a worker: the study has asked its workers to start nothing more (a model failed)."""
    return _stop is not None and _stop.is_set()


def run_side_by_side(
    run: Callable[..., dict], jobs: dict[str, tuple], configs: dict[str, Any], workers: int
) -> dict:
    """Each model in its own process, `workers` at a time; the first failure stops them all."""
    # RNN training uses one core well and two poorly: on a small machine, models side by
    # side (one thread each, train.threads) finish sooner than one after another.
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_init, initargs=(stop, os.getpid())
    ) as pool:
        # Longest budgets first, so the slowest model does not start last.
        order = sorted(
            jobs, key=lambda n: (-configs[n].train.max_minutes, -configs[n].train.max_steps)
        )
        futures = {name: pool.submit(run, *jobs[name]) for name in order}
        wait(futures.values(), return_when=FIRST_EXCEPTION)
        failed = [
            f.exception()
            for f in futures.values()
            if f.done() and not f.cancelled() and f.exception()
        ]
        if failed:  # report the first failure now, not after the other models finish
            # SIGTERM: a model still training saves a checkpoint and stops (the next run
            # of the study resumes it). The executor has no public handle on its workers,
            # and shutdown() forgets them, so they are taken first.
            workers_now = list((getattr(pool, "_processes", None) or {}).values())
            stop.set()
            for f in futures.values():
                f.cancel()
            for proc in workers_now:
                proc.terminate()
            raise failed[0]
        return {name: futures[name].result() for name in jobs}
