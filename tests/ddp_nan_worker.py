"""`nmt` under torchrun where rank 1 alone sees a NaN loss at its 3rd forward pass (used by
tests/test_train.py: the other rank must not hang in DDP's gradient all-reduce)."""
import os
import sys

import nmt.train as train_mod
from nmt.cli import main

real_loss = train_mod.loss_fn
calls = {"n": 0}


def loss_fn(logits, target, smoothing):
    calls["n"] += 1
    loss = real_loss(logits, target, smoothing)
    return loss * float("nan") if os.environ.get("RANK") == "1" and calls["n"] == 3 else loss


train_mod.loss_fn = loss_fn
sys.exit(main(sys.argv[1:]))
