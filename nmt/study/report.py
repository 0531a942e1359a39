"""A study's joint report: study.json, study.md (the bucket tables side by side, the length
verdicts, the paired tests, the models' sizes and budgets) and bleu_by_length.png (Bahdanau et al.
2014, Fig. 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from nmt.config.metrics import metric_label, report_metrics
from nmt.files import atomic_write
from nmt.run_dir import RunDir
from nmt.scoring.compare import (
    comparison_markdown,
    length_verdicts,
    load_comparison,
    paired,
    verdicts,
)
from nmt.scoring.report import merge_note, plot_bleu_by_length

if TYPE_CHECKING:
    from nmt.study.scoring import Scoring


def _models_table(configs: dict[str, Any], results: dict, existing: list[str]) -> list[str]:
    """Each model's size, steps, training time and scores (each metric every model has), and
    which models the study did not train or stopped before their step budget."""
    metrics = [m for m in report_metrics() if all(m in r for r in results.values())]
    head = ["model", "params", "steps", "train minutes", *map(metric_label, metrics)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, r in results.items():
        minutes = "-" if r["train_seconds"] is None else f"{r['train_seconds'] / 60:.1f}"
        cells = [name, f"{r['params']:,}", f"{r['steps']:,}", minutes]
        lines.append("| " + " | ".join(cells + [f"{r[m]:.2f}" for m in metrics]) + " |")
    if existing:
        said = "; ".join(f"{n} ({results[n]['stop_reason']})" for n in existing)
        lines += ["", f"Scored, not trained by this study: {said}."]
    cut = [
        n
        for n, r in results.items()
        if n not in existing
        and configs[n].train.max_steps
        and r["steps"] < configs[n].train.max_steps
    ]
    if cut:
        lines += [
            "",
            f"Stopped before their step budget: {', '.join(cut)} "
            f"({'; '.join(results[n]['stop_reason'] for n in cut)}).",
        ]
    return lines


def write_report(
    study: dict,
    path: str,
    out_dir: Path,
    configs: dict[str, Any],
    results: dict,
    scoring: "Scoring",
    beam: int,
    suffix: str = "",
    existing: Sequence[str] = (),
) -> None:
    """study.json, study.md and bleu_by_length.png (each name + `suffix`), with paired tests
    against seq2seq; `existing`: the models the study scored but did not train."""
    # The fixed-vector model (seq2seq) first: it is the baseline of the paired tests.
    order = sorted(results, key=lambda n: configs[n].model.arch != "seq2seq")
    comp = load_comparison([str(scoring.report(RunDir(out_dir / n), beam)) for n in order], order)
    split = scoring.split + (f", {scoring.direction}" if scoring.direction else "")
    paired(comp)
    results = {n: results[n] for n in order}
    atomic_write(out_dir / f"study{suffix}.json", json.dumps(results, indent=2) + "\n")
    summary = [
        f"# Study {study.get('name', Path(path).stem)}: BLEU by source length "
        f"({split}, beam {beam})",
        "",
        comparison_markdown(comp),
        merge_note(next(iter(results.values()))),
        "## Does BLEU fall with length? (each model's 95% bootstrap intervals)",
        "",
        *length_verdicts(comp),
        "",
        f"## Which models beat {order[0]} significantly (BLEU, paired bootstrap)",
        "",
        *verdicts(comp),
        "",
        *_models_table(configs, results, list(existing)),
    ]
    text = "\n".join(summary) + "\n"
    atomic_write(out_dir / f"study{suffix}.md", text)
    plot_bleu_by_length(
        results,
        out_dir / f"bleu_by_length{suffix}.png",
        tests=comp.tests or None,
        title=f"BLEU by source length ({split}, beam {beam})",
    )
