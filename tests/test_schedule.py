"""The learning-rate schedules as functions of the step: warm-up, inverse square root, and the
cosine that ends a fixed budget annealed."""

from __future__ import annotations

import math

import pytest

from nmt.config import TrainConfig
from nmt.config.load import check_trainable, load_config
from nmt.errors import NmtError
from nmt.training.schedule import Schedule


def cosine(**kw) -> Schedule:
    return Schedule(TrainConfig(schedule="cosine", lr=1e-3, min_lr=1e-5, **kw))


def test_cosine_warms_up_linearly_then_falls_to_min_lr_at_max_steps():
    s = cosine(warmup_steps=100, max_steps=1100)
    assert s.lr(50) == pytest.approx(5e-4)
    assert s.lr(100) == pytest.approx(1e-3)
    assert s.lr(600) == pytest.approx(1e-5 + (1e-3 - 1e-5) / 2)  # halfway: the mean
    assert s.lr(1100) == pytest.approx(1e-5)
    assert s.lr(5000) == pytest.approx(1e-5)  # past the budget (a resume with more steps)


def test_cosine_falls_monotonically_after_warm_up():
    s = cosine(warmup_steps=10, max_steps=200)
    rates = [s.lr(step) for step in range(10, 201)]
    assert all(a >= b for a, b in zip(rates, rates[1:]))


def test_cosine_without_warm_up_starts_at_its_peak():
    s = cosine(max_steps=1000)
    assert s.lr(1) == pytest.approx(1e-5 + (1e-3 - 1e-5) * (1 + math.cos(math.pi / 1000)) / 2)


def test_inverse_sqrt_peaks_at_the_end_of_warm_up():
    s = Schedule(TrainConfig(schedule="inverse_sqrt", lr=2e-3, warmup_steps=400))
    assert s.lr(200) == pytest.approx(1e-3)
    assert s.lr(400) == pytest.approx(2e-3)
    assert s.lr(1600) == pytest.approx(1e-3)


def test_cosine_needs_a_step_budget_past_its_warm_up(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text(
        "data:\n  source: synthetic\nmodel:\n  arch: rnnsearch\n"
        "train:\n  schedule: cosine\n  warmup_steps: 500\n  max_steps: 500\n"
    )
    with pytest.raises(NmtError, match=r"'train.schedule: cosine' in cfg.yaml .*max_steps"):
        check_trainable(load_config(path), "cfg.yaml")
