"""The loss by length on paper: tables and a figure of each model's per-token loss on the
reference by source-length bucket and, for the long sentences, by relative position in the
reference (`nmt.scoring.loss_by_length` computes them), and the paired gap between two models."""

from __future__ import annotations

import math
import os
from typing import Optional

import numpy as np
from matplotlib.figure import Figure

from nmt.scoring.metrics import bucket_label
from nmt.scoring.report import _save
from nmt.scoring.tables import markdown_table

TENTH_LABELS = [f"{10 * k}-{10 * (k + 1)}%" for k in range(10)]
# A gap that grows with length: its interval at the long sentences lies above its 11-20 interval.
REFERENCE_WORDS = 11


def _cell(group: Optional[dict], key: str = "nll") -> str:
    if not group or group.get(key) is None:
        return "-"
    ci = group.get(f"{key}_ci")
    return f"{group[key]:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _p(p: Optional[float]) -> str:
    return "-" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


def _pooled_row(record: dict) -> bool:
    """Whether the long sentences pool several buckets (then they get a row of their own)."""
    long = record.get("long") or {}
    inside = [b for b in record["buckets"] if b["lo"] >= long.get("lo", math.inf)]
    return len(inside) > 1


def loss_table(records: dict[str, dict]) -> str:
    """Markdown: each model's loss per token [95% interval] by source-length bucket (non-empty
    ones), the long buckets pooled when there are several, and the whole set."""
    first = next(iter(records.values()))
    header = ["source words", "n", *records]
    rows = [
        [
            bucket_label(b["lo"], b["hi"]),
            str(b["n"]),
            *(_cell(r["buckets"][k]) for r in records.values()),
        ]
        for k, b in enumerate(first["buckets"])
        if b["n"]
    ]
    if _pooled_row(first):
        long = first["long"]
        label = bucket_label(long["lo"], long["hi"]) + " pooled"
        rows.append([label, str(long["n"]), *(_cell(r.get("long")) for r in records.values())])
    rows.append(["all", str(first["n"]), *(_cell(r) for r in records.values())])
    return markdown_table(header, rows)


def positions_table(records: dict[str, dict]) -> str:
    """Markdown: each model's loss per token in each tenth of the long sentences' references."""
    first = next(iter(records.values()))["positions"]
    header = ["reference position", *records]
    rows = [
        [label, *(_cell(r["positions"]["tenths"][k]) for r in records.values())]
        for k, label in enumerate(TENTH_LABELS)
    ]
    what = bucket_label(first["lo"], first["hi"])
    return f"The {first['n']} references of {what}-word sources:\n\n" + markdown_table(header, rows)


def gap_table(gaps: dict[str, dict]) -> str:
    """Markdown: each pair's loss gap (a minus b) [paired 95% interval] and p by bucket."""
    first = next(iter(gaps.values()))
    header = ["source words", "n"]
    for name in gaps:
        header += [name, f"p ({name})"]
    groups = [(bucket_label(b["lo"], b["hi"]), k) for k, b in enumerate(first["buckets"]) if b["n"]]
    if sum(1 for b in first["buckets"] if b["lo"] >= first["long"]["lo"] and b["n"]) > 1:
        groups.append((bucket_label(first["long"]["lo"], first["long"]["hi"]) + " pooled", "long"))
    groups.append(("all", "all"))
    rows = []
    for label, k in groups:
        pick = (lambda g: g["buckets"][k]) if isinstance(k, int) else (lambda g: g[k])
        cells = [label, str(pick(first)["n"])]
        for g in gaps.values():
            cells += [_cell(pick(g), "gap"), _p(pick(g)["p"])]
        rows.append(cells)
    return markdown_table(header, rows)


def gap_verdicts(gaps: dict[str, dict]) -> list[str]:
    """One line per pair: is the gap at the long sentences larger than at 11-20 words, with
    disjoint paired intervals?"""
    lines = []
    for name, g in gaps.items():
        ref = next(
            (b for b in g["buckets"] if b["lo"] <= REFERENCE_WORDS <= (b["hi"] or 10**9)), None
        )
        long = g["long"]
        if not ref or ref["gap_ci"] is None or long["gap_ci"] is None or ref is long:
            continue
        grows = long["gap_ci"][0] > ref["gap_ci"][1]
        verdict = (
            "larger, with disjoint intervals" if grows else "not larger with disjoint intervals"
        )
        lines.append(
            f"- {name}: {_cell(long, 'gap')} nats per token at "
            f"{bucket_label(long['lo'], long['hi'])} words against {_cell(ref, 'gap')} at "
            f"{bucket_label(ref['lo'], ref['hi'])}: {verdict}"
        )
    return lines


def plot_loss_by_length(
    records: dict[str, dict], path: str | os.PathLike, title: Optional[str] = None
) -> None:
    """Two panels: each model's loss per token by source-length bucket, and for the long
    sentences by tenth of the reference; 95% intervals as error bars."""
    _save(loss_figure(records, title), path)


def loss_figure(records: dict[str, dict], title: Optional[str] = None) -> Figure:
    fig = Figure(figsize=(11.0, 4.2))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1.0]})
    first = next(iter(records.values()))
    shown = [k for k, b in enumerate(first["buckets"]) if b["n"]]
    labels = [f"{bucket_label(b['lo'], b['hi'])}\nn={b['n']}" for b in first["buckets"]]
    pos = first["positions"]
    for name, r in records.items():
        _errorbars(left, [r["buckets"][k] for k in shown], name)
        if pos["n"]:
            _errorbars(right, r["positions"]["tenths"], name)
    left.set_xticks(range(len(shown)), [labels[k] for k in shown])
    left.set_xlabel("source sentence length (words)")
    left.set_ylabel("loss on the reference (nats per token)")
    long = f"{bucket_label(pos['lo'], pos['hi'])}-word sources"
    for ax in (left, right) if pos["n"] else (left,):
        ax.grid(True, alpha=0.4)
        ax.margins(x=0.06)
    if pos["n"]:
        labels = [label.replace("-", "-\n") for label in TENTH_LABELS]
        right.set_xticks(range(10), labels, fontsize=7)
        right.set_xlabel(f"position in the reference ({long}, n={pos['n']})")
    else:  # nothing to draw: say so instead of an empty axis
        right.set_axis_off()
        right.text(
            0.5,
            0.5,
            f"no sentence of {long} in this split:\nno loss by position",
            ha="center",
            va="center",
            fontsize=10,
            transform=right.transAxes,
        )
    legend_on = right if pos["n"] else left
    legend_on.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.suptitle(title or "Loss on the reference by length (95% bootstrap intervals)")
    return fig


def _errorbars(ax, groups: list[dict], name: str) -> None:
    y = np.array([math.nan if g["nll"] is None else g["nll"] for g in groups])
    err = None
    if all(g.get("nll_ci") for g in groups):
        err = np.array([[v - g["nll_ci"][0], g["nll_ci"][1] - v] for v, g in zip(y, groups)]).T
    ax.errorbar(np.arange(len(y)), y, yerr=err, marker="o", capsize=3, label=name)
