"""`nmt` under torchrun with a fault on rank 1 only (used by tests/test_train.py):
NMT_TEST_FAULT=nan    rank 1 sees a NaN loss at its 3rd forward pass;
NMT_TEST_FAULT=signal rank 1 gets SIGINT during its 3rd step (the ranks agree on stopping in
                      the step's one device read, after the backward pass).
Rank 0 must neither hang nor take a different way out of the run."""

import os
import sys

import nmt.training.trainer as train_mod
from nmt.cli import main

FAULT = os.environ["NMT_TEST_FAULT"]
ON_THIS_RANK = os.environ.get("RANK") == "1"
real_loss, real_forward = train_mod.loss_fn, train_mod.Trainer._forward_loss
calls = {"n": 0}


def loss_fn(*args):
    calls["n"] += 1
    loss = real_loss(*args)
    return loss * float("nan") if ON_THIS_RANK and calls["n"] == 3 else loss


def forward_loss(self, *args):
    if ON_THIS_RANK and self.p.step == 2:  # p.step counts the steps already done: the 3rd
        self.stops.signal = "SIGINT"
    return real_forward(self, *args)


if FAULT == "nan":
    train_mod.loss_fn = loss_fn
elif FAULT == "signal":
    train_mod.Trainer._forward_loss = forward_loss
sys.exit(main(sys.argv[1:]))
