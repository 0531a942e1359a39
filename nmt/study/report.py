"""A study's joint report: study.json, study.md (the bucket tables side by side, the length
verdicts, the paired tests, the output length against the reference, the loss on the reference
by length with the fixed vector's gap, the models' sizes and budgets), bleu_by_length.png
(Bahdanau et al. 2014, Fig. 2: interval bands, the training caps marked) and
loss_by_length.png."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from nmt.config.metrics import metric_label, report_metrics
from nmt.files import atomic_write
from nmt.run_dir import RunDir
from nmt.scoring.compare import (
    comparison_markdown,
    length_verdicts,
    load_comparison,
    paired,
    pooled_long,
    verdicts,
)
from nmt.scoring.length_figures import (
    gap_table,
    gap_verdicts,
    loss_table,
    plot_loss_by_length,
    positions_table,
)
from nmt.scoring.loss_by_length import loss_gap, read_sentence_losses
from nmt.scoring.report import SRCS_FILE, plot_bleu_by_length
from nmt.scoring.tables import length_table, merge_note

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
    existing: Mapping[str, str] = MappingProxyType({}),
) -> None:
    """study.json, study.md and bleu_by_length.png (each name + `suffix`), with paired tests
    against seq2seq; `existing`: the models the study scored but did not train, with their run
    directories."""
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
        *_length_section(comp),
        *_models_table(configs, results, list(existing)),
    ]
    reports = {n: scoring.report(RunDir(out_dir / n), beam) for n in order}
    data = training_data(configs, existing)
    summary += _loss_section(out_dir, suffix, data, configs, results, reports, split)
    text = "\n".join(summary) + "\n"
    atomic_write(out_dir / f"study{suffix}.md", text)
    caps = {n: data[n].train_max_words for n in order if data[n].train_max_words}
    plot_bleu_by_length(
        results,
        out_dir / f"bleu_by_length{suffix}.png",
        tests=comp.tests or None,
        title=f"BLEU by source length ({split}, beam {beam})",
        bands=True,
        caps=caps,
    )


def _length_section(comp) -> list[str]:
    """study.md's output length against the reference by source length, the long sentences
    pooled as the verdicts pool them: short output or wrong words."""
    pooled = {n: pooled_long(comp.reports[n], s, "bleu") for n, s in comp.scores.items()}
    table = length_table(comp.scores, pooled)
    if not table:
        return []
    return ["## Output length against the reference (short output or wrong words?)", "", table]


def training_data(configs: dict[str, Any], existing: Mapping[str, str]) -> dict[str, Any]:
    """Each model's training data: its study config's, or for an existing run what its own
    RUN/config.yaml says it trained on (its study config holds the study's data, which it is
    scored on)."""
    from nmt.config.load import load_config

    return {
        n: load_config(RunDir(existing[n]).config, stored=True).data if n in existing else c.data
        for n, c in configs.items()
    }


def fixed_vector_pairs(
    configs: dict[str, Any], data: dict[str, Any], names: Sequence[str]
) -> list[tuple[str, str]]:
    """(seq2seq, rnnsearch) pairs trained on the same `data`: whose loss gap is the fixed
    vector's cost (seq2seq-30 with rnnsearch-30, not with rnnsearch-50)."""
    arch = {n: configs[n].model.arch for n in names}
    return [
        (a, b)
        for a in names
        for b in names
        if arch[a] == "seq2seq" and arch[b] == "rnnsearch" and data[a] == data[b]
    ]


def _loss_section(
    out_dir: Path,
    suffix: str,
    data: dict[str, Any],
    configs: dict[str, Any],
    results: dict,
    reports: dict[str, Path],
    split: str,
) -> list[str]:
    """study.md's loss on the reference by length (the models whose reports hold it), the
    seq2seq-minus-rnnsearch gaps, loss_gaps.json and loss_by_length.png."""
    records = {n: r["loss_by_length"] for n, r in results.items() if r.get("loss_by_length")}
    if not records:
        return []
    plot_loss_by_length(
        records,
        out_dir / f"loss_by_length{suffix}.png",
        title=f"Loss on the reference by length ({split}; 95% bootstrap intervals)",
    )
    first = next(iter(records.values()))
    boot = first.get("bootstrap") or {}
    lines = [
        "",
        "## Loss on the reference by source length",
        "",
        f"The loss in {first['unit']}: each group pools its tokens (summed loss over its "
        f"tokens); [low, high]: 95% bootstrap interval over sentences "
        f"({boot.get('samples', '?')} resamples, seed {boot.get('seed', '?')}).",
        "",
        loss_table(records),
        positions_table(records),
    ]
    gaps = _gaps(configs, data, records, reports)
    atomic_write(out_dir / f"loss_gaps{suffix}.json", json.dumps(gaps, indent=2) + "\n")
    if gaps:
        lines += [
            "## The fixed vector's cost: seq2seq's loss minus rnnsearch's (paired bootstrap)",
            "",
            "Positive: seq2seq's loss is higher. [low, high] and p: paired bootstrap (both "
            "models on the same resampled sentences; p as sacreBLEU's paired test).",
            "",
            gap_table(gaps),
            *gap_verdicts(gaps),
        ]
    return lines


def _gaps(
    configs: dict[str, Any], data: dict[str, Any], records: dict, reports: dict[str, Path]
) -> dict[str, dict]:
    """Each fixed-vector pair's paired loss gap, from the sentences' losses in their reports."""
    gaps = {}
    for a, b in fixed_vector_pairs(configs, data, list(records)):
        stats = [read_sentence_losses(reports[n]) for n in (a, b)]
        srcs_file = reports[a] / SRCS_FILE
        if any(s is None for s in stats) or not srcs_file.is_file():
            continue  # a report written before the loss was: no paired gap
        srcs = srcs_file.read_text(encoding="utf-8").split("\n")[:-1]
        bounds = [x["hi"] for x in records[a]["buckets"] if x["hi"] is not None]
        gaps[f"{a} - {b}"] = loss_gap(srcs, stats[0], stats[1], bounds)
    return gaps
