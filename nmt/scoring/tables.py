"""Markdown tables of reports: scores by source length per model with bootstrap intervals and
paired significance marks, one model's metrics, the output length against the reference, and
the printout of `nmt evaluate`. Plain text only: nothing here draws (`nmt.scoring.report`)."""

from __future__ import annotations

from typing import Optional

from nmt.config.metrics import higher_is_better, metric_label, report_metrics
from nmt.errors import NmtError
from nmt.scoring.bootstrap import SIGNIFICANCE
from nmt.scoring.metrics import bucket_label

# Significance marks (tables and plots): which way a model differs from the first, not only that.
BETTER, WORSE = "▲", "▼"


# ------------------------------------------------------------------------------- buckets


def buckets_of(scores_by_model: dict[str, dict]) -> list[tuple[int, int | None]]:
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


def shown_buckets(scores_by_model: dict[str, dict]) -> tuple[list[int], list[str]]:
    """Indices of the buckets that hold sentences, and the labels of the empty ones left out."""
    ranges = buckets_of(scores_by_model)
    first = next(iter(scores_by_model.values()))["buckets"]
    shown = [k for k, b in enumerate(first) if b["n"] > 0]
    return shown, [bucket_label(*ranges[k]) for k in range(len(ranges)) if k not in shown]


def _fmt(value: Optional[float], ci: Optional[list] = None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if not ci else f"{value:.2f} [{ci[0]:.1f}, {ci[1]:.1f}]"


def significance_mark(
    p: Optional[float], mine: Optional[float], theirs: Optional[float], metric: str
) -> str:
    """BETTER or WORSE where the paired test says p < SIGNIFICANCE (by the metric's direction:
    lower TER is better), else ''."""
    if p is None or p >= SIGNIFICANCE or mine is None or theirs is None or mine == theirs:
        return ""
    return BETTER if (mine > theirs) == higher_is_better(metric) else WORSE


def _fmt_p(p: Optional[float], mark: str = "") -> str:
    if p is None:
        return "-"
    return ("<0.001" if p < 0.001 else f"{p:.3f}") + (f" {mark}" if mark else "")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"  # right-aligned columns
    return "\n".join([line(header), rule, *map(line, rows)]) + "\n"


def _notes(scores_by_model: dict[str, dict], dropped: list[str], tests: Optional[dict]) -> str:
    notes = []
    if dropped:
        notes.append(
            f"Empty buckets not shown: {', '.join(dropped)} source words (no sentence that long)."
        )
    boot = next(iter(scores_by_model.values())).get("bootstrap")
    if boot:
        notes.append(
            f"[low, high]: 95% bootstrap interval ({boot['samples']} resamples, "
            f"seed {boot['seed']})."
        )
    if tests:
        first = next(iter(scores_by_model))
        samples = next(iter(tests.values())).get("samples", "?")
        notes.append(
            f"p: sacreBLEU's paired bootstrap test against {first} ({samples} "
            f"resamples); {BETTER} significantly better, {WORSE} significantly worse than "
            f"{first} (p < {SIGNIFICANCE})."
        )
    return "".join(f"\n{n}\n" for n in notes)


def bucket_table(
    scores_by_model: dict[str, dict], metric: str = "bleu", tests: Optional[dict] = None
) -> str:
    """Markdown table of one metric: a row per non-empty length bucket and one for the whole
    test set, the sentence count, each model's score [95% interval], and with `tests` (model ->
    paired test against the first model) a p-value column after each other model."""
    ranges = buckets_of(scores_by_model)
    shown, dropped = shown_buckets(scores_by_model)
    names = list(scores_by_model)
    header = ["source words", "n"]
    for i, name in enumerate(names):
        header.append(
            name if metric == "bleu" or len(names) == 1 else f"{name} {metric_label(metric)}"
        )
        if tests and i > 0:
            header.append(f"p ({name})")

    def row(label: str, n: int, get, get_p) -> list[str]:
        cells = [label, str(n)]
        theirs = get(next(iter(scores_by_model.values())))[0]
        for i, (name, s) in enumerate(scores_by_model.items()):
            value, ci = get(s)
            cells.append(_fmt(value, ci))
            if tests and i > 0:
                p = get_p(tests.get(name))
                cells.append(_fmt_p(p, significance_mark(p, value, theirs, metric)))
        return cells

    rows = [
        row(
            bucket_label(*ranges[k]),
            next(iter(scores_by_model.values()))["buckets"][k]["n"],
            lambda s, k=k: (s["buckets"][k].get(metric), s["buckets"][k].get(f"{metric}_ci")),
            lambda t, k=k: t and t["buckets"][k].get(metric),
        )
        for k in shown
    ]
    first = next(iter(scores_by_model.values()))
    rows.append(
        row(
            "all",
            first["n"],
            lambda s: (s.get(metric), s.get(f"{metric}_ci")),
            lambda t: t and t["p"].get(metric),
        )
    )
    return markdown_table(header, rows) + _notes(scores_by_model, dropped, tests)


def metrics_table(scores: dict) -> str:
    """One model's table: a row per non-empty bucket (and 'all'), a column per metric."""
    ranges = buckets_of({"m": scores})
    shown, dropped = shown_buckets({"m": scores})
    metrics = [m for m in report_metrics() if m in scores]
    header = ["source words", "n", *(metric_label(m) for m in metrics)]
    rows = [
        [
            bucket_label(*ranges[k]),
            str(scores["buckets"][k]["n"]),
            *(
                _fmt(scores["buckets"][k].get(m), scores["buckets"][k].get(f"{m}_ci"))
                for m in metrics
            ),
        ]
        for k in shown
    ]
    rows.append(
        ["all", str(scores["n"]), *(_fmt(scores[m], scores.get(f"{m}_ci")) for m in metrics)]
    )
    return markdown_table(header, rows) + _notes({"m": scores}, dropped, None)


def _length_cells(length: Optional[dict], one_model: bool) -> list[str]:
    if not length:
        return ["-"] * (3 if one_model else 1)
    ci = length.get("ratio_ci")
    ratio = f"{length['ratio']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
    bp, short = f"{length['bp']:.3f}", f"{100 * length['short']:.1f}%"
    return [ratio, bp, short] if one_model else [f"{ratio} · BP {bp} · {short} short"]


def length_table(scores_by_model: dict[str, dict], pooled: Optional[dict] = None) -> str:
    """Markdown table of the output's length against the reference by source-length bucket:
    the length ratio [95% interval], BLEU's brevity penalty and the share of hypotheses shorter
    than half their reference (`nmt.scoring.output_length`); `pooled` (model -> the long
    sentences as one group) adds its row. Empty when the scores hold no length (no BLEU)."""
    first = next(iter(scores_by_model.values()))
    if not first.get("length"):
        return ""
    ranges = buckets_of(scores_by_model)
    shown, dropped = shown_buckets(scores_by_model)
    names, one = list(scores_by_model), len(scores_by_model) == 1
    header = ["source words", "n"] + (
        ["length ratio", "brevity penalty", "shorter than half"] if one else names
    )

    def row(label: str, n, groups: list[Optional[dict]]) -> list[str]:
        return [label, str(n)] + [c for g in groups for c in _length_cells(g, one)]

    rows = [
        row(
            bucket_label(*ranges[k]),
            first["buckets"][k]["n"],
            [s["buckets"][k].get("length") for s in scores_by_model.values()],
        )
        for k in shown
    ]
    if pooled and all(pooled.get(n) for n in names):
        some = pooled[names[0]]
        label = f"{bucket_label(some['lo'], some['hi'])} pooled"
        rows.append(row(label, some["n"], [pooled[n].get("length") for n in names]))
    rows.append(row("all", first["n"], [s.get("length") for s in scores_by_model.values()]))
    note = (
        "\nLength ratio: hypothesis tokens over reference tokens (sacreBLEU's 13a tokens, as "
        "BLEU counts them) [95% bootstrap interval]; BP: BLEU's brevity penalty at that ratio; "
        "short: the share of hypotheses shorter than half their reference.\n"
    )
    return markdown_table(header, rows) + note + _notes(scores_by_model, dropped, None)


def format_scores(scores: dict) -> str:
    """Human-readable scores: each metric with its interval and signature, then the table."""
    lines = []
    for m in report_metrics():
        if m in scores:
            ci = scores.get(f"{m}_ci")
            sig = scores.get("signature" if m == "bleu" else f"{m}_signature", "?")
            interval = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
            lines.append(f"{metric_label(m)} = {scores[m]:.2f}{interval} (signature {sig})")
    loss = scores.get("loss_by_length")
    if loss and loss.get("nll") is not None:
        ci = loss.get("nll_ci")
        interval = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
        lines.append(f"loss on the reference = {loss['nll']:.3f}{interval} {loss['unit']}")
    text = "\n".join(lines) + "\n"
    if scores.get("buckets"):
        text += "\n" + metrics_table(scores) + merge_note(scores)
        lengths = length_table({"m": scores})
        text += "\nOutput length against the reference:\n\n" + lengths if lengths else ""
    return text


def merge_note(scores: dict) -> str:
    """The line that says which length buckets were merged and why (eval.min_bucket)."""
    merge = scores.get("bucket_merge")
    if not merge:
        return ""
    asked = ",".join(str(b) for b in merge["asked"])
    return (
        f"Buckets merged so that each holds at least {merge['min_sentences']} sentences "
        f"(eval.min_bucket; asked for upper bounds {asked}).\n"
    )
