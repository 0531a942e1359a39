"""`nmt evaluate` of a multilingual model without --direction: every trained direction of the
split decoded by the one loaded model, a report directory each (RUN/eval_SPLIT_beamK_de-en,
...), and a table of them all beside them (RUN/eval_SPLIT_beamK_directions.md and .json):
BLEU, chrF, sentences, off-target rate and BLEU by source length, per direction."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from nmt.config import Config
from nmt.config.metrics import metric_label, report_metrics
from nmt.data.directions import load_directions
from nmt.errors import NmtError
from nmt.files import atomic_write
from nmt.inference import Loaded, load_for_decoding
from nmt.jobs.evaluate import EvalOptions, evaluate_loaded, language_identifier, report_place
from nmt.scoring.metrics import bucket_label

SUMMARY = "directions"  # RUN/eval_SPLIT_beamK_directions.{md,json}; REPORT/directions.{md,json}


@dataclass
class Evaluation:
    """What `nmt evaluate` wrote: a report per direction and, for every direction of a
    multilingual model, their table."""

    reports: list[tuple[dict, Path]]  # (scores, report directory), in the config's order
    summary: Optional[Path] = None  # the table (.md; .json beside it)
    table: str = ""
    meta: dict = field(default_factory=dict)


def evaluate_run(target: str | list[str], o: Optional[EvalOptions] = None) -> Evaluation:
    """`nmt evaluate`: one report, or for a multilingual model without `o.direction` (and on a
    split, not files) one per trained direction and their table."""
    o = o or EvalOptions()
    m = load_for_decoding(target, o.device, int8=o.int8, overrides=o.overrides)
    # the model decides whether there are directions to loop over; o.data, the files scored on
    data = o.data or m.cfg.data
    if not m.cfg.data.directions or not data.directions or o.direction or o.src_file or o.ref_file:
        return Evaluation([evaluate_loaded(m, o)], meta=m.meta)
    return evaluate_directions(m, o)


def evaluate_directions(m: Loaded, o: EvalOptions) -> Evaluation:
    """Every trained direction of the split, with one identifier for the off-target rate;
    `o.report_dir`, if given, holds a directory per direction and the table."""
    for flag, given in (("--constraints", o.constraints_file), ("--pivot", o.pivot)):
        if given:
            raise NmtError(f"{flag} is for one direction: give --direction SRC-TGT")
    cfg = m.cfg if o.data is None else dataclasses.replace(m.cfg, data=o.data)
    split = o.split or cfg.eval.split
    load_directions(cfg.data, split)  # every direction's files read and checked before decoding
    identified = language_identifier(m.cfg, o)  # the languages the model writes
    base = Path(o.report_dir) if o.report_dir else None
    reports = []
    for name in cfg.data.directions:
        one = dataclasses.replace(
            o, split=split, direction=name, report_dir=str(base / name) if base else None
        )
        reports.append(evaluate_loaded(m, one, identified))
    k = reports[0][0]["beam"]
    if base is None:
        place = report_place(cfg, m.meta, split, k, dataclasses.replace(o, report_dir=None), False)
        summary = place[0].with_name(f"{place[0].name}_{SUMMARY}.md")
    else:
        summary = base / f"{SUMMARY}.md"
    table = directions_table(reports)
    _write_summary(summary, cfg, m.meta, split, k, reports, table)
    return Evaluation(reports, summary, table, m.meta)


def _write_summary(
    path: Path, cfg: Config, meta: dict, split: str, k: int, reports: list, table: str
) -> None:
    """The table as markdown under a title, and its numbers as JSON beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    title = (
        f"# {path.parent.name}: every direction of split '{split}', beam {k}\n\n"
        f"{cfg.model.arch}, {meta['path']} (step {meta['step']})\n\n"
    )
    atomic_write(path, title + table)
    rows = {s["direction"]["name"]: {"report": str(r), **_row(s)} for s, r in reports}
    record = {
        "checkpoint": meta["path"],
        "step": meta["step"],
        "split": split,
        "beam": k,
        "directions": rows,
        "mean": _means([s for s, _ in reports]),
    }
    atomic_write(path.with_suffix(".json"), json.dumps(record, indent=2) + "\n")


def _metrics(scores: dict) -> list[str]:
    return [m for m in report_metrics() if isinstance(scores.get(m), (int, float))]


def _row(scores: dict) -> dict:
    """One direction's numbers in the table's JSON."""
    off = scores.get("off_target") or {}
    return {
        "n": scores["n"],
        **{m: scores[m] for m in _metrics(scores)},
        "off_target": off.get("share"),
        "buckets": [
            {"lo": b["lo"], "hi": b["hi"], "n": b["n"], "bleu": b.get("bleu")}
            for b in scores["buckets"]
        ],
    }


def _means(all_scores: list[dict]) -> dict:
    """Each metric's mean over the directions (what training's validation follows)."""
    return {m: float(np.mean([s[m] for s in all_scores])) for m in _metrics(all_scores[0])}


def directions_table(reports: list[tuple[dict, Path]]) -> str:
    """Markdown: a row per direction (and their mean), columns sentences, each metric, the
    off-target rate and BLEU per source-length bucket with its sentence count."""
    all_scores = [s for s, _ in reports]
    metrics = _metrics(all_scores[0])
    ranges = sorted(
        {(b["lo"], b["hi"]) for s in all_scores for b in s["buckets"] if b["n"]},
        key=lambda r: r[0],
    )
    header = ["direction", "n", *(metric_label(m) for m in metrics), "off-target"]
    header += [f"BLEU {bucket_label(*r)} (n)" for r in ranges]
    rows = []
    for s in all_scores:
        share = (s.get("off_target") or {}).get("share")
        by = {(b["lo"], b["hi"]): b for b in s["buckets"]}
        rows.append(
            [s["direction"]["name"], str(s["n"]), *(f"{s[m]:.2f}" for m in metrics)]
            + ["" if share is None else f"{100 * share:.1f}%"]
            + [_bucket_cell(by.get(r)) for r in ranges]
        )
    means = _means(all_scores)
    rows.append(["mean", "", *(f"{means[m]:.2f}" for m in metrics), ""] + [""] * len(ranges))
    lines = [header, ["---"] * len(header), *rows]
    table = "".join("| " + " | ".join(cells) + " |\n" for cells in lines)
    why = (all_scores[0].get("off_target") or {}).get("why")
    return table + (f"\nOff-target rate not measured: {why}.\n" if why else "")


def _bucket_cell(bucket: Optional[dict]) -> str:
    if not bucket or not bucket["n"] or bucket.get("bleu") is None:
        return ""
    return f"{bucket['bleu']:.2f} ({bucket['n']})"
