"""The learning-rate schedule: a function of the step, times a plateau factor."""

from __future__ import annotations

import logging
import math

from nmt.config import TrainConfig

log = logging.getLogger("nmt")


class Schedule:
    """Learning rate as a function of the step, times a plateau factor updated on validation.

    constant: lr after linear warm-up; noam / inverse_sqrt: linear warm-up to lr, then
    lr * sqrt(warmup / step) (Vaswani et al.'s schedule with `lr` as its peak); plateau: lr times
    `plateau_factor` each time validation fails to improve for `plateau_patience` validations;
    cosine: linear warm-up to lr, then min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2 with t
    going from 0 after warm-up to 1 at max_steps (Loshchilov & Hutter 2017, one cycle).
    """

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.scale, self.best, self.bad = 1.0, None, 0

    def lr(self, step: int) -> float:
        c = self.cfg
        if c.schedule == "plateau":
            return max(c.lr * self.scale, c.min_lr)
        warm = min(1.0, step / c.warmup_steps) if c.warmup_steps else 1.0
        if c.schedule in ("noam", "inverse_sqrt") and c.warmup_steps and step > c.warmup_steps:
            return c.lr * math.sqrt(c.warmup_steps / step)
        if c.schedule == "cosine" and step > c.warmup_steps:
            t = min(1.0, (step - c.warmup_steps) / (c.max_steps - c.warmup_steps))
            return c.min_lr + (c.lr - c.min_lr) * (1 + math.cos(math.pi * t)) / 2
        return c.lr * warm

    def observe(self, score: float, higher_is_better: bool) -> None:
        if self.cfg.schedule != "plateau":
            return
        if self.best is None or (score > self.best if higher_is_better else score < self.best):
            self.best, self.bad = score, 0
        else:
            self.bad += 1
            if self.bad > self.cfg.plateau_patience:
                self.scale *= self.cfg.plateau_factor
                self.bad = 0
                log.info(f"plateau: learning rate scaled to {self.lr(0):.3g}")

    def state_dict(self) -> dict:
        return {"scale": self.scale, "best": self.best, "bad": self.bad}

    def load_state_dict(self, st: dict) -> None:
        self.scale, self.best, self.bad = st["scale"], st["best"], st["bad"]
