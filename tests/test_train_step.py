"""The training step as a GPU sees it: device -> host reads per step, strict metrics lines, fp16
overflow steps skipped without moving the schedule."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import nmt
from nmt.checkpoint import load_checkpoint, step_checkpoints
from nmt.config.load import load_config
from nmt.jobs import train as train_job
from nmt.training.log import strict_json
from nmt.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from test_train import metrics, write_config  # noqa: E402

NMT_DIR = str(Path(nmt.__file__).parent)
# Every way Python code reads a tensor's value onto the host (each one a sync on a GPU).
READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__")


@contextmanager
def count_host_reads(counter: dict):
    """Count reads made by nmt's own code or torch.amp (GradScaler) while `counter["on"]`."""
    originals = {name: getattr(torch.Tensor, name) for name in READS}

    def wrap(name, fn):
        def counted(self, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if counter["on"] and (caller.startswith(NMT_DIR) or "torch/amp" in caller):
                counter["reads"].append(f"{name} in {Path(caller).name}")
            return fn(self, *args, **kwargs)

        return counted

    for name, fn in originals.items():
        setattr(torch.Tensor, name, wrap(name, fn))
    try:
        yield counter
    finally:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)


@pytest.mark.parametrize("arch", ["seq2seq", "rnnsearch", "transformer"])
def test_at_most_one_host_read_per_step_outside_logging_steps(tmp_path, monkeypatch, arch):
    steps = 4
    real_validate = Trainer._validate_and_checkpoint
    counter = {"on": False, "reads": []}

    def train_steps_only(self):  # the final validation reads the device: not counted
        counter["on"] = False
        real_validate(self)

    real_train = Trainer.train

    def counted_train(self):
        counter["on"] = True
        return real_train(self)

    monkeypatch.setattr(Trainer, "_validate_and_checkpoint", train_steps_only)
    monkeypatch.setattr(Trainer, "train", counted_train)
    cfg = write_config(tmp_path, arch, max_steps=steps, log_every=1000, accum_steps=2, device="cpu")
    with count_host_reads(counter):
        train_job.train(load_config(cfg))
    assert len(counter["reads"]) <= steps, counter["reads"]
    assert counter["reads"] == ["tolist in step.py"] * steps  # the step's one read


def test_metrics_lines_are_strict_json_with_null_for_non_finite_numbers():
    line = strict_json(
        {"step": 3, "split": "train", "loss": float("nan"), "grad_norm": float("inf"), "lr": 0.001}
    )
    assert json.loads(line, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")) == {
        "step": 3,
        "split": "train",
        "loss": None,
        "grad_norm": None,
        "lr": 0.001,
    }


def test_fp16_overflow_steps_are_skipped_and_do_not_advance_the_schedule(tmp_path, monkeypatch):
    # A GradScaler on the CPU, and gradients that overflow in the first two backward passes
    # (a finite loss): the path an fp16 overflow takes on a GPU.
    real_init = Trainer.__init__
    backward = {"n": 0}

    def overflow_twice(grad):
        backward["n"] += 1
        return grad * float("inf") if backward["n"] <= 2 else grad

    def with_scaler(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        next(self.model.parameters()).register_hook(overflow_twice)

    monkeypatch.setattr(Trainer, "__init__", with_scaler)
    cfg = write_config(
        tmp_path,
        "transformer",
        max_steps=6,
        log_every=1,
        device="cpu",
        schedule="noam",
        warmup_steps=4,
    )
    run = train_job.train(load_config(cfg)).run
    ck = load_checkpoint(step_checkpoints(run)[-1])
    assert ck["progress"]["scaler_skipped"] == 2 and ck["step"] == 6
    assert ck["progress"]["batch_in_epoch"] == 8  # the skipped batches were read
    assert ck["scaler"]["scale"] == 256.0  # halved twice
    rows = [m for m in metrics(run) if m["split"] == "train"]
    assert [r["step"] for r in rows] == list(range(1, 7))
    # the schedule did not move on skipped steps: step 1 got step 1's warm-up learning rate
    assert rows[0]["lr"] == pytest.approx(0.003 / 4)
    log = (run / "train.log").read_text()
    assert "fp16 overflow at step 1: step skipped, loss scale now 512 (1 skipped in total)" in log
    assert "non-finite loss" not in log
