"""stop_decision: each reason to stop, and which wins when several hold at once."""

from __future__ import annotations

import pytest

from conftest import make_config
from nmt.stopping import STOP_CODES, stop_decision


def cfg(**train):
    return make_config(data={"source": "synthetic"}, train=train)


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


def test_a_signal_outranks_a_limit_between_ranks():
    assert STOP_CODES["signal"] > STOP_CODES["limit"] > 0
