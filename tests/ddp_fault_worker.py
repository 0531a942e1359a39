"""`nmt` under torchrun with a fault on rank 1 only (used by tests/test_train.py):
NMT_TEST_FAULT=nan    rank 1 sees a NaN loss at its 3rd forward pass;
NMT_TEST_FAULT=signal rank 1 gets SIGINT right after its 3rd step.
Rank 0 must neither hang nor take a different way out of the run."""
import os
import sys

import nmt.train as train_mod
from nmt.cli import main

FAULT = os.environ["NMT_TEST_FAULT"]
ON_THIS_RANK = os.environ.get("RANK") == "1"
real_loss, real_step = train_mod.loss_fn, train_mod.Trainer.train_step
calls = {"n": 0}


def loss_fn(logits, target, smoothing):
    calls["n"] += 1
    loss = real_loss(logits, target, smoothing)
    return loss * float("nan") if ON_THIS_RANK and calls["n"] == 3 else loss


def train_step(self, batches):
    out = real_step(self, batches)
    if ON_THIS_RANK and self.p.step == 2:  # p.step counts the step after train_step returns
        self._signal = "SIGINT"
    return out


if FAULT == "nan":
    train_mod.loss_fn = loss_fn
elif FAULT == "signal":
    train_mod.Trainer.train_step = train_step
sys.exit(main(sys.argv[1:]))
