"""Report files: an evaluation's hyps.txt, srcs.txt, refs.txt and scores.json; plots of scores by
source length per model, with bootstrap intervals and paired significance marks; and attention
maps (the tables: `nmt.scoring.tables`).

Figures are drawn on matplotlib's Agg canvas directly (no pyplot), so nothing needs a display
and no global figure state leaks between calls. Every file is written atomically.
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Optional

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nmt.config.metrics import metric_label
from nmt.errors import NmtError
from nmt.scoring.bootstrap import SIGNIFICANCE
from nmt.scoring.metrics import SCORES_FILE, bucket_label
from nmt.scoring.tables import BETTER, buckets_of, shown_buckets, significance_mark

HYPS_FILE, SRCS_FILE, REFS_FILE = "hyps.txt", "srcs.txt", "refs.txt"
PLOT_FILE = "bleu_by_length.png"
# ------------------------------------------------------------------------------- plots


def _save(fig: Figure, path: str | os.PathLike, dpi: int = 120) -> None:
    from nmt.files import atomic_write

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    atomic_write(path, buf.getvalue())


def plot_bleu_by_length(
    scores_by_model: dict[str, dict],
    path: str | os.PathLike,
    title: str | None = None,
    tests: Optional[dict] = None,
    metric: str = "bleu",
    bands: bool = False,
    caps: Optional[dict[str, int]] = None,
) -> None:
    """A metric against source-length bucket, one line per model (Bahdanau et al. 2014, Fig. 2),
    with 95% bootstrap intervals as error bars (`bands`: shaded bands), each bucket's sentence
    count under its label and, with `tests`, a triangle over a model's point where it is
    significantly better (pointing up) or worse (down) than the first; `caps` (model -> words)
    marks the longest training sentence of models trained on short ones (data.train_max_words)."""
    fig = bleu_by_length_figure(scores_by_model, title, tests, metric, bands, caps)
    _save(fig, path)


def bleu_by_length_figure(
    scores_by_model: dict[str, dict],
    title: str | None = None,
    tests: Optional[dict] = None,
    metric: str = "bleu",
    bands: bool = False,
    caps: Optional[dict[str, int]] = None,
) -> Figure:
    """The figure of `plot_bleu_by_length`. The marks sit above the error bars with the axis
    raised to hold them, and the legend stands outside the axes, where it covers no bar."""
    ranges = buckets_of(scores_by_model)
    shown, dropped = shown_buckets(scores_by_model)
    first = next(iter(scores_by_model.values()))
    x = np.arange(len(shown), dtype=float)
    fig = Figure(figsize=(8.4, 4.4))
    ax = fig.add_subplot()
    offsets = np.linspace(-0.08, 0.08, len(scores_by_model)) if len(scores_by_model) > 1 else [0.0]
    base = [first["buckets"][k].get(metric) for k in shown]
    tops, marks = [], []
    for (name, scores), dx in zip(scores_by_model.items(), offsets):
        bs = [scores["buckets"][k] for k in shown]
        color, top = _model_line(ax, name, bs, metric, x + (0 if bands else dx), shown, bands)
        tops += [t for t in top if not math.isnan(t)]
        test = (tests or {}).get(name)
        for i, k in enumerate(shown if test else ()):
            p = test["buckets"][k].get(metric)
            mark = significance_mark(p, bs[i].get(metric), base[i], metric)
            if mark:
                marks.append((x[i] + dx, top[i], mark, color))
    high = max(tops, default=0.0) or 1.0
    pad = 0.06 * high  # from the top of the error bar to the mark's centre
    for xi, t, mark, color in marks:
        up = mark == BETTER
        ax.plot([xi], [t + pad], "^" if up else "v", color=color, ms=7, gid=("worse", "better")[up])
    ax.set_ylim(0, high + 2.5 * pad)  # room for a mark over the highest bar, clear of the frame
    ax.set_xticks(x, [f"{bucket_label(*ranges[k])}\nn={first['buckets'][k]['n']}" for k in shown])
    ax.set_xlabel(
        "source sentence length (words)"
        + (f"; empty, not shown: {', '.join(dropped)}" if dropped else "")
    )
    ax.set_ylabel(
        metric_label(metric) + (" (95% bootstrap interval)" if first.get("bootstrap") else "")
    )
    ax.margins(x=0.1)
    ax.grid(True, alpha=0.4)
    _cap_lines(ax, [ranges[k] for k in shown], caps or {})
    _legend(ax, next(iter(scores_by_model)) if tests else None)
    if title:
        ax.set_title(title)
    return fig


def _model_line(ax, name: str, bs, metric: str, x: np.ndarray, shown: list[int], band=False):
    """One model's points and error bars (or band); (its colour, the top of each bar or point)."""
    y = np.array([math.nan if b.get(metric) is None else b[metric] for b in bs], dtype=float)
    cis = [b.get(f"{metric}_ci") for b in bs]
    err = None
    if all(ci is not None for ci in cis):
        err = np.array([[v - ci[0] for v, ci in zip(y, cis)], [ci[1] - v for v, ci in zip(y, cis)]])
    # A line joins neighbouring buckets only: a dropped empty bucket leaves a gap.
    gaps = [i + 1 for i in range(len(shown) - 1) if shown[i + 1] != shown[i] + 1]
    gx, gy = np.insert(x, gaps, np.nan), np.insert(y, gaps, np.nan)
    gerr = None if err is None else np.insert(err, gaps, np.nan, axis=1)
    if band:
        color = ax.plot(gx, gy, marker="o", label=name, clip_on=False)[0].get_color()
        if gerr is not None:
            ax.fill_between(gx, gy - gerr[0], gy + gerr[1], color=color, alpha=0.2, lw=0)
        return color, (y if err is None else y + err[1])
    line = ax.errorbar(gx, gy, yerr=gerr, marker="o", capsize=3, label=name, clip_on=False)
    return line.lines[0].get_color(), (y if err is None else y + err[1])


def _cap_lines(ax, ranges: list[tuple[int, Optional[int]]], caps: dict[str, int]) -> None:
    """A dashed vertical line where each training cap falls between the buckets (30 words: after
    the 21-30 bucket), named for the models trained with it."""
    for cap in sorted(set(caps.values())):
        at = [i for i, (_, hi) in enumerate(ranges) if hi is not None and hi <= cap]
        if at and at[-1] + 1 < len(ranges):
            models = ", ".join(n for n, c in caps.items() if c == cap)
            label = f"longest training sentence: {cap} words\n({models})"
            ax.axvline(at[-1] + 0.5, color="0.3", ls="--", lw=1, label=label, gid=f"cap{cap}")


def _legend(ax, baseline: Optional[str]) -> None:
    """The models, and with a `baseline` what the marks mean; right of the axes, off the bars."""
    handles, labels = ax.get_legend_handles_labels()
    if baseline:
        for shape, what in (("^", "better"), ("v", "worse")):
            handles.append(ax.plot([], [], shape, color="0.35", ms=7)[0])
            labels.append(
                f"significantly {what} than\n{baseline} (p < {SIGNIFICANCE},\npaired bootstrap)"
            )
    ax.legend(
        handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0
    )


MAX_FIG_INCHES = (14.0, 12.0)  # about 1700 x 1450 px at 120 dpi, whatever the sentence length
INCH_PER_LABEL = 0.11  # a 7-point label; a longer axis labels every k-th token


def _label_ticks(n: int, inches: float) -> list[int]:
    step = max(1, math.ceil(n * INCH_PER_LABEL / inches))
    return list(range(0, n, step))


def plot_attention(
    src_tokens: list[str],
    tgt_tokens: list[str],
    weights,
    path: str | os.PathLike,
    title: str | None = None,
) -> None:
    """Heatmap of attention weights [len(tgt_tokens), len(src_tokens)]: source on x, target on y.
    The figure grows with the sentence up to MAX_FIG_INCHES; past that, every k-th token is
    labelled (with its position) so the labels stay readable."""
    w = np.asarray(weights, dtype=float)
    if w.shape != (len(tgt_tokens), len(src_tokens)):
        raise NmtError(
            f"attention weights have shape {w.shape}, expected "
            f"({len(tgt_tokens)}, {len(src_tokens)}) = (target tokens, source tokens)"
        )
    width = min(MAX_FIG_INCHES[0], max(4.0, INCH_PER_LABEL * 1.6 * len(src_tokens) + 2.5))
    height = min(MAX_FIG_INCHES[1], max(3.0, INCH_PER_LABEL * 1.6 * len(tgt_tokens) + 2.0))
    fig = Figure(figsize=(width, height))
    ax = fig.add_subplot()
    # Scaled to the largest weight, not to 1: attention spread over a long sentence stays
    # visible (the colour bar gives the values).
    image = ax.imshow(
        w,
        cmap="Greys",
        vmin=0.0,
        vmax=float(w.max(initial=0.0)) or 1.0,
        aspect="auto",
        interpolation="nearest",
    )
    for axis, tokens, inches, setter in (
        (0, src_tokens, width - 2.5, ax.set_xticks),
        (1, tgt_tokens, height - 2.0, ax.set_yticks),
    ):
        ticks = _label_ticks(len(tokens), inches)
        every = len(ticks) < len(tokens)
        labels = [f"{tokens[i]} ({i + 1})" if every else tokens[i] for i in ticks]
        setter(ticks, labels, fontsize=7, **({"rotation": 90} if axis == 0 else {}))
    ax.set_xlabel(
        "source"
        + (
            " (every k-th token labelled, with its position)"
            if len(_label_ticks(len(src_tokens), width - 2.5)) < len(src_tokens)
            else ""
        )
    )
    ax.set_ylabel("target")
    fig.colorbar(image, ax=ax, fraction=0.03)
    if title:
        ax.set_title(title, fontsize=9)
    _save(fig, path)


# ------------------------------------------------------------------------------- files


def _lines(texts: list[str]) -> str:
    # A line must stay one line, or the file stops lining up with the others.
    return "".join(" ".join(t.splitlines()) + "\n" for t in texts)


def write_report(
    report_dir: str | os.PathLike,
    scores: dict,
    hyps: list[str],
    plot: bool = True,
    srcs: Optional[list[str]] = None,
    refs: Optional[list[str]] = None,
    name: Optional[str] = None,
    title: Optional[str] = None,
) -> None:
    """Write hyps.txt, scores.json, (with them) srcs.txt and refs.txt, which later paired tests
    read, and (if `plot`) bleu_by_length.png into `report_dir`; `name` labels the curve."""
    from nmt.files import atomic_write

    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / HYPS_FILE, _lines(hyps))
    for file, texts in ((SRCS_FILE, srcs), (REFS_FILE, refs)):
        if texts is not None:
            atomic_write(out / file, _lines(texts))
    atomic_write(out / SCORES_FILE, json.dumps(scores, indent=2) + "\n")
    if plot:
        plot_bleu_by_length(
            {name or out.name or "model": scores},
            out / PLOT_FILE,
            title=title or "BLEU by source length",
        )
