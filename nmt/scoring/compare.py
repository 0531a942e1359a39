"""`nmt compare`: several models' reports side by side, with sacreBLEU's paired bootstrap test of
each model against the first, on the whole test set and per source-length bucket.

A compared path is a report directory (it holds scores.json) or a run directory, whose newest
report is taken (or the one --split/--beam pick). Reports computed on different test sets are
refused: their numbers do not measure the same thing.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from nmt.config.metrics import higher_is_better, metric_label, report_metrics, text_metrics
from nmt.errors import NmtError
from nmt.run_dir import RunDir
from nmt.scoring.bootstrap import DEFAULT_SAMPLES, DEFAULT_SEED, SIGNIFICANCE
from nmt.scoring.metrics import (
    SCORES_FILE,
    bucket_label,
    load_scores,
    paired_tests,
    score_report,
)
from nmt.scoring.report import HYPS_FILE, REFS_FILE, SRCS_FILE, plot_bleu_by_length
from nmt.scoring.tables import bucket_table

log = logging.getLogger("nmt")
COMPARE_PLOT, COMPARE_TABLE, COMPARE_JSON = "compare.png", "compare.md", "compare.json"


def find_report(
    path: str | os.PathLike, split: Optional[str] = None, beam: Optional[int] = None
) -> Path:
    """`path` itself if it holds scores.json, else the newest report in the run directory
    `path` (eval_*/scores.json), restricted to --split and --beam when given."""
    p = Path(path)
    if (p / SCORES_FILE).is_file() and split is None and beam is None:
        return p
    if not p.is_dir():
        raise NmtError(f"no scores file at {p / SCORES_FILE}: {p} is not a report or run directory")
    found = []
    for scores in (r / SCORES_FILE for r in RunDir(p).reports()):
        if not scores.is_file():
            continue
        try:
            s = json.loads(scores.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if (split is None or s.get("split") == split) and (beam is None or s.get("beam") == beam):
            found.append(scores.parent)
    if not found:
        if (p / SCORES_FILE).is_file():
            return p  # a report dir given together with --split/--beam: take it as it is
        want = " and ".join(w for w in (split and f"split {split}", beam and f"beam {beam}") if w)
        have = [d.name for d in RunDir(p).reports()]
        raise NmtError(
            f"no scores file at {p / SCORES_FILE} and no report"
            f"{' for ' + want if want else ''} in {p} "
            f"({'reports there: ' + ', '.join(have) if have else 'run nmt evaluate ' + str(p) + ' first'})"
        )
    return max(found, key=lambda d: (d / SCORES_FILE).stat().st_mtime)


def model_name(given: str | os.PathLike, report: Path) -> str:
    """A report is named after its run: the run directory given, or the one holding the report
    (RUN/eval_test_beam5 -> RUN's name); a report elsewhere keeps its own directory name."""
    given = Path(given).resolve()
    report = report.resolve()
    if given != report:
        return given.name
    if RunDir.is_report_of_run(report):
        return report.parent.name
    return report.name


def _distinct(names: list[str], reports: list[Path]) -> list[str]:
    """Two reports of one run (say beam 1 and beam 5) get their report names added."""
    return [f"{n} ({r.name})" if names.count(n) > 1 else n for n, r in zip(names, reports)]


def _describe(scores: dict) -> str:
    ts = scores.get("test_set") or {}
    what = ts.get("split") or scores.get("split") or ts.get("src_file") or "?"
    return f"{what}, {scores['n']} sentences"


def check_same_test_set(scores_by_model: dict[str, dict]) -> None:
    """Refuse reports on different test sets (their fingerprints, or failing those their sizes
    and bucket counts, differ); warn when an old report cannot be checked."""
    (first, a), *rest = scores_by_model.items()
    for name, b in rest:
        fa, fb = (s.get("test_set", {}).get("sha256") for s in (a, b))
        counts = [[x["n"] for x in s["buckets"]] for s in (a, b)]
        if (fa and fb and fa != fb) or a["n"] != b["n"] or counts[0] != counts[1]:
            raise NmtError(
                f"'{name}' ({_describe(b)}) and '{first}' ({_describe(a)}) were scored "
                f"on different test sets; compare reports on the same sentences"
            )
        if not (fa and fb):
            log.warning(
                f"warning: cannot check that '{name}' and '{first}' used the same test "
                f"set (a report written before scores.json recorded it)"
            )


@dataclass
class Comparison:
    scores: dict[str, dict]  # model -> scores.json
    reports: dict[str, Path]  # model -> report directory
    tests: dict[str, dict] = field(default_factory=dict)  # model -> paired test vs the first


def _read(report: Path, file: str) -> Optional[list[str]]:
    path = report / file
    return path.read_text(encoding="utf-8").split("\n")[:-1] if path.is_file() else None


def paired(comp: Comparison, n_samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED) -> None:
    """Fill comp.tests: each model against the first, on the metrics both reports hold that
    the hypotheses can be scored on again (COMET's sentence scores are not kept: no test)."""
    (first, base), *rest = comp.scores.items()
    srcs, refs = _read(comp.reports[first], SRCS_FILE), _read(comp.reports[first], REFS_FILE)
    hyps_a = _read(comp.reports[first], HYPS_FILE)
    if srcs is None or refs is None or hyps_a is None:
        log.warning(
            f"warning: no paired tests: {comp.reports[first]} has no {SRCS_FILE} and "
            f"{REFS_FILE} (re-run nmt evaluate to write them)"
        )
        return
    bounds = [b["hi"] for b in base["buckets"] if b["hi"] is not None]
    for name, scores in rest:
        hyps_b = _read(comp.reports[name], HYPS_FILE)
        if hyps_b is None or len(hyps_b) != len(refs):
            log.warning(
                f"warning: no paired test for '{name}': {comp.reports[name] / HYPS_FILE} "
                f"does not hold {len(refs)} lines"
            )
            continue
        metrics = tuple(m for m in text_metrics() if m in base and m in scores)
        test = paired_tests(srcs, refs, hyps_a, hyps_b, bounds, metrics, n_samples, seed)
        comp.tests[name] = {**test, "baseline": first, "samples": n_samples, "seed": seed}


def load_comparison(
    paths: list[str],
    names: Optional[list[str]] = None,
    split: Optional[str] = None,
    beam: Optional[int] = None,
) -> Comparison:
    if not paths:
        raise NmtError("nothing to compare: no report directories given")
    reports = [find_report(p, split, beam) for p in paths]
    if names is None:
        names = _distinct([model_name(p, r) for p, r in zip(paths, reports)], reports)
    if len(names) != len(reports):
        raise NmtError(f"got {len(names)} names for {len(reports)} report directories")
    if len(set(names)) != len(names):
        raise NmtError(f"model names must be distinct to compare them, got {names}")
    comp = Comparison(
        {n: load_scores(r) for n, r in zip(names, reports)}, dict(zip(names, reports))
    )
    check_same_test_set(comp.scores)
    return comp


def comparison_markdown(comp: Comparison) -> str:
    """A table by length of each metric every report holds (the metric table's order), with
    p-values where tests ran."""
    metrics = [m for m in report_metrics() if all(m in s for s in comp.scores.values())]
    parts = [
        f"## {metric_label(m)} by source length\n\n"
        + bucket_table(comp.scores, m, comp.tests or None)
        for m in metrics
    ]
    return "\n".join(parts)


def compare_reports(
    paths: list[str],
    out_dir: str | os.PathLike,
    names: Optional[list[str]] = None,
    split: Optional[str] = None,
    beam: Optional[int] = None,
    n_samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
) -> str:
    """Compare reports: write compare.md, compare.png and compare.json; return the tables."""
    from nmt.files import atomic_write

    comp = load_comparison(paths, names, split, beam)
    if len(comp.scores) > 1 and n_samples:
        paired(comp, n_samples, seed)
    table = comparison_markdown(comp)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / COMPARE_TABLE, table)
    atomic_write(
        out / COMPARE_JSON,
        json.dumps(
            {"reports": {n: str(r) for n, r in comp.reports.items()}, "tests": comp.tests}, indent=2
        )
        + "\n",
    )
    first = next(iter(comp.scores.values()))
    plot_bleu_by_length(
        comp.scores,
        out / COMPARE_PLOT,
        tests=comp.tests or None,
        title=f"BLEU by source length ({_describe(first)})",
    )
    return table


def verdicts(comp: Comparison, metric: str = "bleu") -> list[str]:
    """One line per other model and bucket: does it beat the first model significantly?"""
    (first, base), *rest = comp.scores.items()
    lines = []
    for name, scores in rest:
        test = comp.tests.get(name)
        if not test:
            continue
        for k, b in enumerate(scores["buckets"]):
            p, mine, theirs = (
                test["buckets"][k].get(metric),
                b.get(metric),
                base["buckets"][k].get(metric),
            )
            if p is None:
                continue
            if p < SIGNIFICANCE:
                better = mine > theirs if higher_is_better(metric) else mine < theirs
                verdict = "beats" if better else "is beaten by"
                what = f"{name} {verdict} {first} significantly"
            else:
                what = f"no significant difference between {name} and {first}"
            lines.append(
                f"- {bucket_label(b['lo'], b['hi'])} words (n={b['n']}): {what} "
                f"({metric_label(metric)} {mine:.2f} vs "
                f"{theirs:.2f}, p = {p:.3f})"
            )
    return lines


# The length lesson (Cho et al. 2014; Bahdanau et al. 2014, Fig. 2): a model whose BLEU on long
# sentences keeps this share of its 11-20-word BLEU keeps its level.
KEEPS_LEVEL = 0.85
LONG_FROM = 51  # source words: the buckets of Bahdanau's long sentences


def pooled_long(report: Path, scores: dict, metric: str) -> Optional[dict]:
    """The sentences from LONG_FROM words scored as one bucket, with the report's bootstrap
    interval; None when the report keeps no texts or the metric cannot be recomputed."""
    texts = [_read(report, f) for f in (SRCS_FILE, HYPS_FILE, REFS_FILE)]
    if metric not in text_metrics() or any(t is None for t in texts):
        return None
    if not len(texts[0]) == len(texts[1]) == len(texts[2]) == scores["n"]:
        return None
    # only the long sentences are scored and resampled (the same draws as a bucket of them)
    keep = [i for i, src in enumerate(texts[0]) if len(src.split()) >= LONG_FROM]
    if not keep:
        return None
    srcs, hyps, refs = ([t[i] for i in keep] for t in texts)
    boot = scores.get("bootstrap") or {}
    return score_report(
        srcs,
        hyps,
        refs,
        [LONG_FROM - 1],
        metrics=(metric,),
        n_samples=boot.get("samples", DEFAULT_SAMPLES),
        seed=boot.get("seed", DEFAULT_SEED),
    )["buckets"][1]


def _bucket_text(b: dict, metric: str) -> str:
    ci = b[f"{metric}_ci"]
    return f"{bucket_label(b['lo'], b['hi'])}: {b[metric]:.2f} [{ci[0]:.1f}, {ci[1]:.1f}]"


def length_verdicts(comp: Comparison, metric: str = "bleu") -> list[str]:
    """One line per model, from its bucket intervals: does its score on long sentences (the
    buckets from 51 words, pooled into one when the report keeps its texts, else the last
    bucket) fall below its 11-20-word bucket with disjoint 95% intervals, and what share of
    that level does it keep?"""
    lines = []
    for name, scores in comp.scores.items():
        buckets = scores["buckets"]
        ref = next((b for b in buckets if b["lo"] <= 11 and (b["hi"] or 11) >= 11), None)
        long = [b for b in buckets if b["lo"] >= LONG_FROM] or buckets[-1:]
        if ref is None or ref in long or not ref.get(metric):
            continue
        if not all(b.get(f"{metric}_ci") for b in [ref, *long]):  # too few sentences to resample
            continue
        label = bucket_label(ref["lo"], ref["hi"])
        where = ", ".join(_bucket_text(b, metric) for b in long)
        pooled = pooled_long(comp.reports[name], scores, metric) if len(long) > 1 else None
        if pooled is not None and pooled.get(f"{metric}_ci"):
            # Bahdanau's long sentences as one group: the buckets past 50 words pooled
            where = f"{_bucket_text(pooled, metric)} ({where})"
            long = [pooled]
        below = all(b[f"{metric}_ci"][1] < ref[f"{metric}_ci"][0] for b in long)
        kept = min(b[metric] / ref[metric] for b in long)
        if below:
            verdict = f"falls with length (below its {label} level, disjoint 95% intervals)"
        elif kept >= KEEPS_LEVEL:
            verdict = f"keeps its level (at least {KEEPS_LEVEL:.0%} of its {label} score)"
        else:
            verdict = f"loses some with length (intervals overlap its {label} level)"
        lines.append(
            f"- {name} {verdict}: {where} against {_bucket_text(ref, metric)}; "
            f"it keeps {kept:.0%} of its {label} score"
        )
    return lines
