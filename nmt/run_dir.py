"""A run directory: the one place that knows its file names and whether it holds a given config.

```
RUN/config.yaml             the resolved config (every default filled in)
RUN/spm.model               joint subwords (or spm.src.model and spm.tgt.model)
RUN/checkpoints/step_N.pt   the last train.keep_last step checkpoints
RUN/best.pt, averaged.pt    best by the validation metric; the average of the last N steps
RUN/metrics.jsonl, train.log, tensorboard/
RUN/trained.json            written by `nmt study` once a model has finished training
RUN/eval_SPLIT_beamK/       reports of `nmt evaluate`
RUN/compare/, RUN/curves/   `nmt compare` and `nmt curves` output, when this run comes first
```
The subword file names belong to `nmt.data.tokenizer`, which writes them; every layer above the
config loader (trainer, checkpoints, evaluation, study) spells the rest of the layout through this
module.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path
from typing import Optional

from nmt.config import Config
from nmt.config.load import dump_yaml, load_config, to_dict, with_absolute_paths
from nmt.config.yaml_file import read_yaml
from nmt.errors import NmtError
from nmt.files import atomic_write

log = logging.getLogger("nmt")
_told: set[Path] = set()  # the stray averaged.pt files already reported in this process

REPORT_PREFIX = "eval_"
# train keys that say how a run is executed, not what it trains: resuming on another machine
# with another thread count is the same run
RUNTIME_KEYS = ("threads", "progress")
_STEP = re.compile(r"step_(\d+)\.pt")


class RunDir:
    """The layout of one training run (nothing is created until a method writes)."""

    CONFIG = "config.yaml"
    CHECKPOINTS = "checkpoints"
    BEST = "best.pt"
    AVERAGED = "averaged.pt"
    METRICS = "metrics.jsonl"
    LOG = "train.log"
    TENSORBOARD = "tensorboard"
    TRAINED = "trained.json"
    COMPARE = "compare"
    CURVES = "curves"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @classmethod
    def of_checkpoint(cls, checkpoint: str | Path) -> "RunDir":
        """The run a checkpoint file belongs to: RUN for RUN/checkpoints/step_N.pt and
        RUN/best.pt; a checkpoint elsewhere counts its own folder as its run."""
        parent = Path(checkpoint).parent
        return cls(parent.parent if parent.name == cls.CHECKPOINTS else parent)

    # ------------------------------------------------------------------ names
    @property
    def config(self) -> Path:
        return self.path / self.CONFIG

    @property
    def checkpoints(self) -> Path:
        return self.path / self.CHECKPOINTS

    @property
    def best(self) -> Path:
        return self.path / self.BEST

    @property
    def averaged(self) -> Path:
        return self.path / self.AVERAGED

    @property
    def metrics(self) -> Path:
        return self.path / self.METRICS

    @property
    def log(self) -> Path:
        return self.path / self.LOG

    @property
    def curves(self) -> Path:
        """Where `nmt curves` writes by default when this run comes first."""
        return self.path / self.CURVES

    @classmethod
    def compare_beside(cls, first: str | Path) -> Path:
        """Where `nmt compare` writes by default: in the first run compared (RUN/compare, also
        for its report RUN/eval_*), or beside a report that lives outside a run."""
        first = Path(first)
        run = first if (first / cls.CONFIG).is_file() else first.parent
        return run / cls.COMPARE

    @property
    def tensorboard(self) -> Path:
        return self.path / self.TENSORBOARD

    @property
    def trained(self) -> Path:
        return self.path / self.TRAINED

    def step_checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step_{step}.pt"

    def report(self, name: str, beam: int, suffix: str = "") -> Path:
        """Where `nmt evaluate` writes the report of split (or file) `name` at beam `beam`."""
        return self.path / f"{REPORT_PREFIX}{name}_beam{beam}{suffix}"

    def reports(self) -> list[Path]:
        """The report directories in this run, by name."""
        return sorted(p for p in self.path.glob(f"{REPORT_PREFIX}*") if p.is_dir())

    @classmethod
    def is_report_of_run(cls, report: Path) -> bool:
        """Whether `report` is a report directory inside a run (RUN/eval_*)."""
        return report.name.startswith(REPORT_PREFIX) and (report.parent / cls.CONFIG).is_file()

    # ------------------------------------------------------------------ checkpoints
    def step_checkpoints(self) -> list[Path]:
        """Step checkpoints, oldest first."""
        found = [p for p in self.checkpoints.glob("step_*.pt") if _STEP.fullmatch(p.name)]
        return sorted(found, key=lambda p: int(_STEP.fullmatch(p.name).group(1)))  # type: ignore[union-attr]

    def checkpoint(self, prefer: str = "best") -> Path:
        """The run's model (prefer='best') or its latest step checkpoint; the other one when that
        is missing. The run's model is averaged.pt when its training writes one (a recipe that
        sets train.average_last means the average as its result), else best.pt: an averaged.pt
        put there by hand (`nmt average -o RUN/averaged.pt`) is used only when named, and the
        log says so once."""
        if not self.path.exists():
            raise NmtError(f"no such checkpoint or run directory: {self.path}")
        steps = self.step_checkpoints()
        if prefer == "best" and self.averaged.is_file():
            if self._training_averages():
                return self.averaged
            self._tell_stray_average()
        if prefer == "best" and self.best.is_file():
            return self.best
        if steps:
            return steps[-1]
        if self.best.is_file():
            return self.best
        if not self.config.is_file():  # every run writes its config before any checkpoint
            raise NmtError(
                f"{self.path} is not a run directory (it has no {self.CONFIG}): expected a "
                f"run directory written by nmt train or a checkpoint file"
            )
        raise NmtError(f"run directory {self.path} has no checkpoint yet (train it first)")

    def _training_averages(self) -> bool:
        """Whether this run's training writes averaged.pt: train.average_last > 0 in its config
        (read as stored, so a config of an older nmt still answers)."""
        try:
            train = read_yaml(self.config, "run config").get("train")
        except NmtError:
            return False
        return isinstance(train, dict) and bool(train.get("average_last"))

    def _tell_stray_average(self) -> None:
        if self.averaged in _told:
            return
        _told.add(self.averaged)
        used = self.BEST if self.best.is_file() else "its latest step checkpoint"
        log.warning(
            f"{self.averaged} is not this run's model (its training does not average: "
            f"train.average_last is 0 in {self.config}), so {used} is used; name the file to "
            f"use it"
        )

    def prune(self, keep: int) -> None:
        """Delete all but the newest `keep` step checkpoints."""
        for old in self.step_checkpoints()[:-keep]:
            old.unlink(missing_ok=True)

    # ------------------------------------------------------------------ the config
    def saved_config(self) -> Optional[Config]:
        """The config this run was trained with (as stored; None when there is none)."""
        return load_config(self.config, stored=True) if self.config.is_file() else None

    def same_config(self, cfg: Config, training_only: bool = False) -> bool:
        """Whether this run was made by `cfg`: every key equal, defaults included. A key added
        to nmt since the run was made counts as its default, and how the run is executed
        (`RUNTIME_KEYS`) does not count, so neither wipes a run that a study would resume.
        `training_only`: leave out the `eval` section, which decides how the trained model is
        scored, never what it is."""
        try:
            saved = self.saved_config()
        except NmtError:  # written by an nmt whose keys this one no longer reads
            return False
        return saved is not None and _compared(saved, training_only) == _compared(
            cfg, training_only
        )

    def holds_run(self) -> bool:
        """Whether anything was trained here: a checkpoint of any kind."""
        return bool(self.step_checkpoints()) or self.best.exists()

    def is_empty(self) -> bool:
        return not self.path.exists() or not any(self.path.iterdir())

    def create(self, cfg: Config, overwrite: bool = False) -> "RunDir":
        """Make the directory (emptied first with `overwrite`) and store the config in it."""
        if overwrite and self.path.exists():
            shutil.rmtree(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write(self.config, dump_yaml(cfg))
        return self

    # ------------------------------------------------------------------ study bookkeeping
    def mark_trained(self, stop_reason: str) -> None:
        atomic_write(self.trained, json.dumps({"stop_reason": stop_reason}) + "\n")

    def trained_reason(self) -> Optional[str]:
        """Why training finished, when `mark_trained` recorded it; else None."""
        if not self.trained.is_file():
            return None
        return json.loads(self.trained.read_text(encoding="utf-8"))["stop_reason"]


def _compared(cfg: Config, training_only: bool) -> dict:
    """The config as `same_config` compares it: `RUNTIME_KEYS` left out, and `eval` too for
    `training_only`."""
    raw = to_dict(with_absolute_paths(cfg))  # a relative path and its absolute form are one file
    for key in RUNTIME_KEYS:
        del raw["train"][key]
    if training_only:
        del raw["eval"]
    return raw
