"""stop_decision: each reason to stop, and which wins when several hold at once, on one rank and
across the ranks of a DDP run."""

from __future__ import annotations

import pytest

from conftest import make_config
from nmt.training import stop_agreement
from nmt.training.distributed import DistInfo
from nmt.training.stop_agreement import StopAgreement
from nmt.training.stopping import STOP_CODES, stop_decision


def cfg(**train):
    return make_config(train=train)


def test_nothing_to_stop_for():
    assert stop_decision(cfg(max_steps=10), step=3, epoch=0, minutes=1.0) is None
    assert stop_decision(cfg()) is None  # no limits at all


@pytest.mark.parametrize(
    "train, facts, kind, reason",
    [
        ({"max_steps": 10}, {"step": 10}, "limit", "reached max_steps=10"),
        ({"max_minutes": 2.5}, {"minutes": 2.5}, "limit", "reached max_minutes=2.5"),
        ({"max_epochs": 3}, {"epoch": 3}, "limit", "reached max_epochs=3"),
        ({}, {"signal": "SIGTERM"}, "signal", "interrupted by SIGTERM"),
        (
            {"patience": 2},
            {"bad_validations": 2},
            "patience",
            "early stopping: no improvement in 2 validations",
        ),
        (
            {"max_bad_steps": 3},
            {"bad_run": ("nan", 3), "step": 4},
            "failed",
            "training diverged: 3 consecutive steps with a non-finite loss at step 5",
        ),
        (
            {"max_bad_steps": 2},
            {"bad_run": ("oom", 2)},
            "failed",
            "out of memory on 2 batches in a row: lower 'data.batch_tokens'",
        ),
    ],
)
def test_each_reason(train, facts, kind, reason):
    stop = stop_decision(cfg(**train), **facts)
    assert stop is not None and stop.kind == kind and stop.reason.startswith(reason)
    assert kind in STOP_CODES


def test_below_each_threshold_nothing_stops():
    c = cfg(max_steps=10, max_minutes=2.0, max_epochs=3, patience=2, max_bad_steps=3)
    assert (
        stop_decision(c, step=9, minutes=1.9, epoch=2, bad_validations=1, bad_run=("nan", 2))
        is None
    )


def test_facts_left_out_are_never_reasons():
    c = cfg(max_minutes=1.0, patience=1)
    assert stop_decision(c, step=5) is None  # no minutes, no validations given


def test_precedence_failed_then_patience_then_signal_then_limits():
    c = cfg(max_steps=5, max_minutes=1.0, max_epochs=1, patience=1, max_bad_steps=1)
    every = {
        "step": 5,
        "minutes": 2.0,
        "epoch": 1,
        "signal": "SIGINT",
        "bad_validations": 1,
        "bad_run": ("nan", 1),
    }
    assert stop_decision(c, **every).kind == "failed"
    del every["bad_run"]
    assert stop_decision(c, **every).kind == "patience"
    del every["bad_validations"]
    assert stop_decision(c, **every).kind == "signal"
    del every["signal"]
    assert stop_decision(c, **every).reason == "reached max_steps=5"
    del every["step"]
    assert stop_decision(c, **every).reason == "reached max_minutes=1"
    del every["minutes"]
    assert stop_decision(c, **every).reason == "reached max_epochs=1"


def two_ranks(monkeypatch, minutes, signals, after_step):
    """Each rank's stop reason and `interrupted` after a check in a 2-rank run with max_minutes=2,
    each rank with its own clock and caught signal; the all-reduce gives the largest code the
    ranks sent, in check's own read or in the step's read (as train_step sends them)."""
    ranks = [StopAgreement(cfg(max_minutes=2.0), DistInfo(rank=r, world=2)) for r in (0, 1)]
    for s, sig in zip(ranks, signals):
        s.signal = sig
    codes = [s.local_code(5, 0, m) for s, m in zip(ranks, minutes)]
    monkeypatch.setattr(stop_agreement, "all_reduce_max", lambda _code, _device: max(codes))
    if after_step:  # the step's read sums each rank's "signal" and "limit" flags
        for s, code in zip(ranks, codes):
            s.heard(2 if 2 in codes else int(1 in codes), code)
    reasons = [s.check(5, 0, m, after_step=after_step) for s, m in zip(ranks, minutes)]
    return reasons, [s.interrupted for s in ranks]


@pytest.mark.parametrize("after_step", [False, True], ids=["own read", "step read"])
def test_a_signal_on_one_rank_interrupts_all_even_where_a_limit_was_reached(
    monkeypatch, after_step
):
    """Rank 0 is past max_minutes while rank 1 caught SIGTERM: every rank ends the run as
    interrupted (checkpointed, resumable), none as finished."""
    reasons, interrupted = two_ranks(monkeypatch, [3.0, 1.0], [None, "SIGTERM"], after_step)
    assert reasons == ["interrupted on another rank", "interrupted by SIGTERM"]
    assert interrupted == [True, True]


@pytest.mark.parametrize("after_step", [False, True], ids=["own read", "step read"])
def test_a_limit_on_one_rank_finishes_the_run_on_all(monkeypatch, after_step):
    reasons, interrupted = two_ranks(monkeypatch, [3.0, 1.0], [None, None], after_step)
    assert reasons == ["reached max_minutes=2", "a limit was reached on another rank"]
    assert interrupted == [False, False]
