"""Report files: hyps.txt and scores.json of an evaluation, tables and plots of BLEU by source
length per model, and attention maps.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot), so nothing needs a display
and no global figure state leaks between calls. Every file is written atomically.
"""
from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nmt.errors import NmtError
from nmt.evaluate import SCORES_FILE, bucket_label, load_scores
from nmt.files import atomic_write

COMPARE_PLOT = "compare.png"
COMPARE_TABLE = "compare.md"


def _buckets(scores_by_model: dict[str, dict]) -> list[tuple[int, int | None]]:
    """The shared (lo, hi) bucket ranges; every model must use the same ones to be compared."""
    if not scores_by_model:
        raise NmtError("nothing to compare: no models given")
    ranges = {}
    for name, scores in scores_by_model.items():
        if not scores.get("buckets"):
            raise NmtError(f"scores of '{name}' have no BLEU-by-length buckets")
        ranges[name] = [(b["lo"], b["hi"]) for b in scores["buckets"]]
    first, *rest = ranges
    for name in rest:
        if ranges[name] != ranges[first]:
            raise NmtError(f"'{name}' and '{first}' were scored with different length buckets")
    return ranges[first]


def bucket_table(scores_by_model: dict[str, dict]) -> str:
    """Markdown table: a row per length bucket, its sentence count, and each model's BLEU."""
    ranges = _buckets(scores_by_model)
    names = list(scores_by_model)
    counts = [b["n"] for b in scores_by_model[names[0]]["buckets"]]
    fmt = lambda bleu: "-" if bleu is None else f"{bleu:.2f}"
    header = ["source words", "n", *names]
    rows = [[bucket_label(lo, hi), str(n), *(fmt(s["buckets"][k]["bleu"]) for s in scores_by_model.values())]
            for k, ((lo, hi), n) in enumerate(zip(ranges, counts))]
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"  # right-aligned columns
    return "\n".join([line(header), rule, *map(line, rows)]) + "\n"


def _save(fig: Figure, path: str | os.PathLike) -> None:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    atomic_write(path, buf.getvalue())


def plot_bleu_by_length(scores_by_model: dict[str, dict], path: str | os.PathLike,
                        title: str | None = None) -> None:
    """BLEU against source-length bucket, one line per model (Bahdanau et al. 2014, Fig. 2)."""
    ranges = _buckets(scores_by_model)
    x = np.arange(len(ranges))
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.add_subplot()
    for name, scores in scores_by_model.items():
        # NaN leaves a gap for an empty bucket instead of pretending its BLEU is 0.
        y = [math.nan if b["bleu"] is None else b["bleu"] for b in scores["buckets"]]
        ax.plot(x, y, marker="o", label=name, clip_on=False)  # keep BLEU-0 markers whole
    ax.set_xticks(x, [bucket_label(lo, hi) for lo, hi in ranges])
    ax.set_xlabel("source sentence length (words)")
    ax.set_ylabel("BLEU")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.4)
    ax.legend()
    if title:
        ax.set_title(title)
    _save(fig, path)


def compare_reports(report_dirs: list[str], out_dir: str | os.PathLike,
                    names: list[str] | None = None) -> str:
    """Load each report dir's scores.json; write compare.png and compare.md; return the table."""
    if not report_dirs:
        raise NmtError("nothing to compare: no report directories given")
    if names is None:
        names = [Path(d).resolve().name for d in report_dirs]
    if len(names) != len(report_dirs):
        raise NmtError(f"got {len(names)} names for {len(report_dirs)} report directories")
    if len(set(names)) != len(names):
        raise NmtError(f"model names must be distinct to compare them, got {names}")
    scores_by_model = {name: load_scores(d) for name, d in zip(names, report_dirs)}
    table = bucket_table(scores_by_model)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / COMPARE_TABLE, table)
    plot_bleu_by_length(scores_by_model, out / COMPARE_PLOT, title="BLEU by source length")
    return table


def plot_attention(src_tokens: list[str], tgt_tokens: list[str], weights, path: str | os.PathLike,
                   title: str | None = None) -> None:
    """Heatmap of attention weights [len(tgt_tokens), len(src_tokens)]: source on x, target on y."""
    w = np.asarray(weights, dtype=float)
    if w.shape != (len(tgt_tokens), len(src_tokens)):
        raise NmtError(f"attention weights have shape {w.shape}, expected "
                       f"({len(tgt_tokens)}, {len(src_tokens)}) = (target tokens, source tokens)")
    # Grow the figure with the sentence so every token keeps a legible tick label.
    fig = Figure(figsize=(max(4.0, 0.35 * len(src_tokens) + 2), max(3.0, 0.35 * len(tgt_tokens) + 1.5)))
    ax = fig.add_subplot()
    image = ax.imshow(w, cmap="Greys", vmin=0.0, vmax=max(1.0, float(w.max(initial=0.0))), aspect="auto")
    ax.set_xticks(range(len(src_tokens)), src_tokens, rotation=90)
    ax.set_yticks(range(len(tgt_tokens)), tgt_tokens)
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    fig.colorbar(image, ax=ax)
    if title:
        ax.set_title(title)
    _save(fig, path)


HYPS_FILE = "hyps.txt"
PLOT_FILE = "bleu_by_length.png"


def write_report(report_dir: str | os.PathLike, scores: dict, hyps: list[str], plot: bool = True) -> None:
    """Write hyps.txt, scores.json and (if `plot`) bleu_by_length.png into `report_dir`."""
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    # A hypothesis must stay on its own line, or hyps.txt stops lining up with the references.
    lines = "".join(" ".join(h.splitlines()) + "\n" for h in hyps)
    atomic_write(out / HYPS_FILE, lines)
    atomic_write(out / SCORES_FILE, json.dumps(scores, indent=2) + "\n")
    if plot:
        plot_bleu_by_length({out.name or "model": scores}, out / PLOT_FILE, title="BLEU by source length")


def format_scores(scores: dict) -> str:
    """Human-readable scores: BLEU and chrF with their signatures, then the by-length table."""
    text = f"BLEU = {scores['bleu']:.2f} (signature {scores['signature']})\n"
    if "chrf" in scores:
        text += f"chrF = {scores['chrf']:.2f} (signature {scores.get('chrf_signature', '?')})\n"
    if scores.get("buckets"):
        text += "\n" + bucket_table({"BLEU": scores})
    return text
