"""Time to quality: each run's validation score against its training minutes, from the
`"seconds"` (training time, summed across resumes) of the validation rows in metrics.jsonl.

A plot (curves.png) and a table (curves.md): how fast each architecture gets where.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nmt.config.metrics import METRICS, higher_is_better, metric_label
from nmt.errors import NmtError
from nmt.run_dir import RunDir

CURVES_PLOT, CURVES_TABLE = "curves.png", "curves.md"


def axis_label(metric: str) -> str:
    """The plot's axis: 'validation BLEU (greedy)', 'validation loss' (validation decodes
    greedily)."""
    row = METRICS.get(metric)
    greedy = " (greedy)" if row is not None and row.from_text else ""
    return f"validation {metric_label(metric)}{greedy}"


@dataclass
class Curve:
    name: str
    steps: list[int]
    minutes: list[float]
    values: list[float]


def read_curve(run: str | Path, metric: str = "bleu", name: str | None = None) -> Curve:
    """The validation rows of a run that carry `metric` and the training seconds."""
    path = RunDir(run).metrics
    if not path.is_file():
        raise NmtError(f"no metrics file at {path}: {run} is not a run directory")
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise NmtError(f"{path}, line {i}: not a JSON object") from None
        if row.get("split") == "valid" and row.get(metric) is not None and "seconds" in row:
            rows.append(row)
    if not rows:
        raise NmtError(
            f"{path} has no validation row with '{metric}' and 'seconds' (runs trained before "
            "validation rows carried their training seconds cannot be drawn)"
        )
    return Curve(
        name or Path(run).name,
        [r["step"] for r in rows],
        [r["seconds"] / 60 for r in rows],
        [r[metric] for r in rows],
    )


def curves_table(curves: list[Curve], metric: str = "bleu") -> str:
    """Per run: its best validation score, at which step and training minute, and its last."""
    best = max if higher_is_better(metric) else min
    lines = [
        f"| run | validations | best {metric} | at step | at minute | last step | minutes |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in curves:
        i = c.values.index(best(c.values))
        lines.append(
            f"| {c.name} | {len(c.values)} | {c.values[i]:.2f} | {c.steps[i]} | "
            f"{c.minutes[i]:.1f} | {c.steps[-1]} | {c.minutes[-1]:.1f} |"
        )
    return "\n".join(lines) + "\n"


def write_curves(curves: list[Curve], out_dir: str | Path, metric: str = "bleu") -> Path:
    """curves.png (score against training minutes, one line per run) and curves.md."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    for c in curves:
        ax.plot(c.minutes, c.values, marker="o", markersize=3, label=c.name)
    ax.set_xlabel("training minutes")
    ax.set_ylabel(axis_label(metric))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right" if higher_is_better(metric) else "upper right")
    fig.tight_layout()
    FigureCanvasAgg(fig).print_png(str(out / CURVES_PLOT))
    (out / CURVES_TABLE).write_text(curves_table(curves, metric), encoding="utf-8")
    return out
