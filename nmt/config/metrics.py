"""The metric table: every score nmt knows, one row each. A new metric is one new row here.

Each row says how the score is computed (its scorer), how tables and plots label it, which way is
better, and whether training's validation computes it (so `train.early_stop_metric` may name it).
Everything reads this table: the config's choices for `eval.metrics` and `train.early_stop_metric`,
evaluation's scores (`nmt.scoring.metrics` builds a sacreBLEU scorer from its row), the report and
comparison tables, the training curves and the trainer's best checkpoint and early stopping.

Plain facts only, so checking a config imports neither torch nor sacreBLEU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# How a score is computed (a row's `scorer`):
SACREBLEU = "sacrebleu:"  # + a class of sacrebleu.metrics, from hypotheses and references alone
SENTENCES = "sentences"  # the mean of sentence scores the caller gives (COMET: nmt.scoring.comet)
TRAINING = "training"  # the trainer's own number (the validation loss); no report holds it


@dataclass(frozen=True)
class MetricRow:
    label: str  # in tables, plot axes and printed scores
    higher_is_better: bool
    scorer: str  # SACREBLEU + class name, SENTENCES or TRAINING
    options: dict[str, Any] = field(default_factory=dict)  # keyword arguments of that class
    validation: bool = False  # training's validation computes it; early stopping may follow it

    @property
    def from_text(self) -> bool:
        """Computed from hypotheses and references alone (what eval.metrics may name)."""
        return self.scorer.startswith(SACREBLEU)


# Row order is the order of columns, printed scores and the config's choices.
METRICS: dict[str, MetricRow] = {
    "bleu": MetricRow("BLEU", True, SACREBLEU + "BLEU", validation=True),
    "chrf": MetricRow("chrF", True, SACREBLEU + "CHRF", validation=True),
    "ter": MetricRow("TER", False, SACREBLEU + "TER"),
    # sacreBLEU's -lc: the scoring of anchors that lowercase
    "bleu_lc": MetricRow("BLEU (lc)", True, SACREBLEU + "BLEU", {"lowercase": True}),
    # from a local checkpoint (nmt evaluate --comet-model), with the unbabel-comet package
    "comet": MetricRow("COMET", True, SENTENCES),
    "loss": MetricRow("loss", False, TRAINING, validation=True),
}


def metric_label(name: str) -> str:
    """How tables and plots name a metric (its own name when the table has no row for it)."""
    row = METRICS.get(name)
    return row.label if row else name


def higher_is_better(name: str) -> bool:
    """The metric's direction (lower TER and loss are better); unknown names count as higher."""
    row = METRICS.get(name)
    return row.higher_is_better if row else True


def text_metrics() -> tuple[str, ...]:
    """Metrics computed from hypotheses and references alone: `eval.metrics` and --metrics."""
    return tuple(n for n, r in METRICS.items() if r.from_text)


def report_metrics() -> tuple[str, ...]:
    """Metrics a scores report can hold, in table order."""
    return tuple(n for n, r in METRICS.items() if r.scorer != TRAINING)


def validation_metrics() -> tuple[str, ...]:
    """What training's validation scores its greedy translations on."""
    return tuple(n for n, r in METRICS.items() if r.validation and r.from_text)


def early_stop_metrics() -> tuple[str, ...]:
    """What `train.early_stop_metric` may name: the validation metrics and the loss."""
    return tuple(n for n, r in METRICS.items() if r.validation)
