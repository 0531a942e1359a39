"""What a study scores its models on: `evaluate.split` and, for multilingual models
(`data.directions`), `evaluate.direction`, the one direction its table compares them in.

A multilingual model is scored by `nmt evaluate --direction` (`EvalOptions.direction`), which
reads that direction's split and puts the language tag where the model was trained to see it; a
one-direction model in the same study must translate that direction itself. Each model's report
is RUN/eval_SPLIT_beamK_SRC-TGT, as `nmt evaluate --direction` names it, so a study that changes
its direction never reuses the scores of another.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from nmt.config import Config
from nmt.config.load import LANGUAGE, load_config, to_dict
from nmt.data.directions import direction_names
from nmt.errors import NmtError
from nmt.files import atomic_write
from nmt.run_dir import RunDir


@dataclass(frozen=True)
class Scoring:
    """The split every model is scored on, and the direction where the models translate
    several (None: each model's one direction)."""

    split: str = "test"
    direction: Optional[str] = None

    @classmethod
    def of(cls, study: dict) -> "Scoring":
        ev = study.get("evaluate") or {}
        return cls(ev.get("split", "test"), ev.get("direction"))

    @property
    def suffix(self) -> str:
        return f"_{self.direction}" if self.direction else ""

    def report(self, run: RunDir, beam: int) -> Path:
        """A model's report directory for this beam."""
        return run.report(self.split, beam, self.suffix)

    def options(self) -> dict:
        """The EvalOptions keys that pick the direction (none without one)."""
        return {"direction": self.direction} if self.direction else {}

    def key(self, cfg: Config, checkpoint: Path, beam: int) -> str:
        """Everything a model's scores depend on: the checkpoint file (path, size, time), the
        whole config it is scored with (its model, and the study's data, decode and eval
        sections), the split, direction and beam. Scores stored under another key are stale."""
        stat = checkpoint.stat()
        what = {
            "checkpoint": [str(checkpoint.resolve()), stat.st_size, stat.st_mtime_ns],
            "config": to_dict(cfg),
            "scoring": [self.split, self.direction, beam],
        }
        return json.dumps(what, sort_keys=True, default=str)


KEY_FILE = "study_key.json"  # beside a report's scores.json: the key they were scored under


def stale_scores(report: Path, key: str) -> bool:
    """Whether the report's scores were computed under another key (or none recorded)."""
    stamp = report / KEY_FILE
    return not stamp.is_file() or stamp.read_text(encoding="utf-8") != key


def record_key(report: Path, key: str) -> None:
    atomic_write(report / KEY_FILE, key)


def check_direction_key(ev: dict, path: str | Path) -> None:
    """`evaluate.direction`: absent, or one direction SRC-TGT."""
    d = ev.get("direction")
    if d is None:
        return
    src, _, tgt = d.partition("-") if isinstance(d, str) else ("", "", "")
    if not (LANGUAGE.fullmatch(src) and LANGUAGE.fullmatch(tgt)) or src == tgt:
        raise NmtError(
            f"'evaluate.direction' in {path} must be one direction SRC-TGT that every model "
            f"translates, e.g. de-en, got {d!r}"
        )


def check_model(
    scoring: Scoring, name: str, cfg: Config, existing: Optional[str], path: str | Path
) -> None:
    """Before any training: a multilingual model needs `evaluate.direction`, which every model
    must translate; an existing multilingual run is scored on study data with its directions."""
    stored = load_config(RunDir(existing).config, stored=True).data if existing else cfg.data
    where = f"model '{name}' in {path}"
    if stored.directions and existing and (not cfg.data.directions or cfg.data.tag != stored.tag):
        raise NmtError(
            f"{where}: {existing} translates several directions with 'data.tag: {stored.tag}'; "
            f"the study scores it on 'base.data', which must list directions with that tag"
        )
    if scoring.direction is None:
        if stored.directions:
            raise NmtError(
                f"{where} translates several directions ({', '.join(stored.directions)}); the "
                f"study compares models in one: set 'evaluate.direction', e.g. "
                f"{stored.directions[0]}"
            )
        return
    have = direction_names(cfg.data)
    if scoring.direction not in have:
        raise NmtError(
            f"'evaluate.direction' in {path} is '{scoring.direction}', which {where} does not "
            f"translate (its directions: {', '.join(have)})"
        )
