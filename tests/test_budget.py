"""Step budgets make a study machine-independent: a slower machine trains the same steps (so the
same model) and is told up front how long they will take; a time cap that cuts a step budget short
is reported, never silent."""

from __future__ import annotations

import json
import time

import pytest
import torch

import nmt.training.trainer as train_mod
from conftest import REPO, tiny_config, tiny_model, write_yaml
from nmt.checkpoint import load_checkpoint
from nmt.cli import main
from nmt.config.load import load_config
from nmt.jobs import train as train_job
from nmt.training.clock import TrainClock
from nmt.training.log import duration
from nmt.training.trainer import Trainer


class SlowerMachine:
    """The training clock on a machine where every training step takes `lag` seconds longer: the delay
    is injected into the clock, so its effect shows in the recorded time, not a stopwatch."""

    def __init__(self, lag: float) -> None:
        self.lag, self.added, self.real = lag, 0.0, time.monotonic

    def __call__(self) -> float:
        return self.real() + self.added


def test_a_slower_machine_trains_the_same_steps_to_the_same_model(tiny_yaml, monkeypatch):
    six_steps = {"max_steps": 6}
    fast = train_job.train(load_config(tiny_yaml(name="fast/config.yaml", train=six_steps)))
    clock, step = SlowerMachine(lag=100.0), Trainer.train_step

    def slow_step(self, batches):  # the same work, each step 100 s later on the clock
        out = step(self, batches)
        clock.added += clock.lag
        return out

    monkeypatch.setattr(train_mod, "TrainClock", lambda: TrainClock(now=clock))
    monkeypatch.setattr(Trainer, "train_step", slow_step)
    slow = train_job.train(load_config(tiny_yaml(name="slow/config.yaml", train=six_steps)))
    a, b = (load_checkpoint(r.run / "best.pt") for r in (fast, slow))
    assert a["step"] == b["step"] == 6
    assert b["progress"]["train_seconds"] >= 6 * clock.lag  # the slower clock was counted
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_step_budget_logs_expected_time_then_progress_with_eta(tiny_yaml):
    cfg = tiny_yaml(train={"max_steps": 6, "log_every": 2})
    run = train_job.train(load_config(cfg)).run
    log = (run / "train.log").read_text()
    assert log.count("expected time: about") == 1
    assert "for the remaining 4 of 6 steps" in log  # told after the first log window (2 steps)
    for step, pct in ((2, 33), (4, 67), (6, 100)):
        assert f"step {step}/6 ({pct}%)" in log
    assert "ETA 0s" in log.split("step 6/6")[1].splitlines()[0]


def test_no_step_budget_means_no_eta_lines(tiny_yaml):
    cfg = tiny_yaml(train={"max_steps": 0, "max_epochs": 1})
    run = train_job.train(load_config(cfg)).run
    assert "ETA" not in (run / "train.log").read_text()


@pytest.mark.parametrize(
    "seconds, text", [(0.4, "0s"), (45, "45s"), (365, "6m05s"), (4320, "1h12m")]
)
def test_durations_read_as_people_write_them(seconds, text):
    assert duration(seconds) == text


def test_study_reports_a_time_cap_that_cut_a_step_budget(tmp_path, capsys):
    study = {
        "name": "capped",
        "base": tiny_config(arch=None, train={"max_steps": 100000, "max_minutes": 0.002}),
        "models": {"rnnsearch": {"model": tiny_model("rnnsearch")}},
        "evaluate": {"split": "test", "beam": 1},
    }
    path = write_yaml(tmp_path / "study.yaml", study)
    assert main(["study", str(path), "--out", str(tmp_path / "s")]) == 0
    err = capsys.readouterr().err
    assert "rnnsearch: 100000 steps, time cap 0.002 min" in err
    assert "rnnsearch hit its time cap before its 100000-step budget" in err
    result = json.loads((tmp_path / "s" / "study.json").read_text())["rnnsearch"]
    assert result["steps"] < 100000 and result["stop_reason"].startswith("reached max_minutes")
    md = (tmp_path / "s" / "study.md").read_text()
    assert "Stopped before their step budget: rnnsearch (reached max_minutes=0.002)" in md


TOYS = sorted((REPO / "configs" / "toy").glob("*.yaml"))


@pytest.mark.parametrize("path", TOYS, ids=[p.stem for p in TOYS])
def test_a_toy_config_is_a_step_budget_that_runs_to_its_last_step(path, tmp_path):
    """No time cap to stop a toy run short of its steps on a busy machine, and fp32 on one
    thread, so the pages' outputs are what another machine prints (getting-started says what
    another CPU's kernels may still change); trained here on a smaller corpus for 4 steps."""
    cfg = load_config(path)
    assert cfg.train.max_steps > 0 and cfg.train.max_minutes == 0
    assert cfg.train.precision == "fp32" and cfg.train.threads == 1
    small = {
        "data.synthetic.train": 200,
        "data.synthetic.valid": 10,
        "data.synthetic.test": 10,
        "train.max_steps": 4,
        "train.valid_every": 100000,
        "train.threads": 1,
        "train.progress": "false",
        "train.run_dir": str(tmp_path / "run"),
    }
    assert (
        main(["train", str(path), *(a for k, v in small.items() for a in ("--set", f"{k}={v}"))])
        == 0
    )
    ckpt = load_checkpoint(tmp_path / "run" / "best.pt")
    assert ckpt["step"] == 4
    assert "stopped at step 4: reached max_steps=4" in (tmp_path / "run" / "train.log").read_text()
