"""`nmt evaluate`: BLEU, chrF and BLEU by length of a checkpoint (or ensemble)."""

from __future__ import annotations

import argparse
import sys

from nmt.cli.options import (
    count,
    decode_args,
    decode_overrides,
    decoding_within_memory,
    ints,
    metrics,
    pivot_arg,
)
from nmt.errors import NmtError


def register(sub: "argparse._SubParsersAction") -> None:
    e = sub.add_parser(
        "evaluate",
        help="BLEU, chrF and BLEU by source length for a checkpoint",
        description="Decode a split (or --src/--ref files) with a checkpoint or run "
        "directory (its best checkpoint), print sacreBLEU with its signature, chrF "
        "and the length-bucket table, and write hyps.txt, scores.json and "
        "bleu_by_length.png into the report directory.",
    )
    e.add_argument(
        "checkpoint",
        nargs="+",
        help="checkpoint file or run directory; several are decoded as one ensemble",
    )
    e.add_argument("--split", help="split role from the config (default: eval.split)")
    e.add_argument("--src", help="source file (with --ref) instead of a config split")
    e.add_argument("--ref", help="reference file (with --src)")
    e.add_argument(
        "--constraints",
        metavar="FILE",
        help="lexical constraints, one line per source line (as nmt translate --constraints); "
        "scores.json records how many were met; the default report directory ends in "
        "_constrained_NAME, NAME the file's name without its extension",
    )
    e.add_argument(
        "--report",
        help="report directory (default: RUN/eval_SPLIT_beamK, or "
        "RUN/eval_file_NAME_beamK for --src NAME.xx)",
    )
    e.add_argument(
        "--buckets",
        type=ints,
        help="bucket upper bounds in source words, e.g. 10,20,30,40,50 (default: eval.buckets)",
    )
    e.add_argument(
        "--direction",
        metavar="SRC-TGT",
        help="a multilingual model: score this direction (trained, or zero-shot: any language it "
        "reads into any it writes), reading SPLIT.SRC and SPLIT.TGT; without it, every trained "
        "direction of the split, with a table of them all (RUN/eval_SPLIT_beamK_directions.md)",
    )
    pivot_arg(e)
    _report_args(e)
    decode_args(e)
    e.set_defaults(func=run)


def _report_args(e: argparse.ArgumentParser) -> None:
    """`nmt evaluate` options of what the report holds: plots, metrics, intervals."""
    e.add_argument(
        "--attention-plots",
        type=count,
        default=0,
        metavar="N",
        help="save soft-alignment heatmaps for the first N sentences",
    )
    e.add_argument(
        "--attention-layer",
        type=int,
        default=-1,
        help="transformer layer whose cross-attention is plotted (default: last)",
    )
    e.add_argument(
        "--attention-head",
        type=int,
        default=None,
        help="transformer head to plot (default: mean over heads)",
    )
    e.add_argument(
        "--compare",
        nargs="+",
        metavar="REPORT_DIR",
        help="also draw this report beside other report or run directories",
    )
    e.add_argument(
        "--metrics",
        type=metrics,
        help="comma-separated sacreBLEU metrics: bleu, chrf, ter, bleu_lc (lowercased BLEU) "
        "(default: the run's eval.metrics, bleu,chrf unless its config says otherwise)",
    )
    e.add_argument(
        "--bootstrap",
        type=count,
        default=1000,
        metavar="N",
        help="bootstrap resamples for the 95%% intervals (0: none; default: 1000)",
    )
    e.add_argument(
        "--comet-model",
        metavar="CKPT",
        help="also score COMET with this local checkpoint (needs unbabel-comet "
        "installed; nothing is downloaded)",
    )
    e.add_argument(
        "--verbose",
        action="store_true",
        help="name the source words the vocabulary does not know, line by line",
    )


def run(a: argparse.Namespace) -> int:
    from nmt.jobs.evaluate import EvalOptions
    from nmt.logs import setup_logging

    setup_logging()
    if not (a.src or a.ref):
        _refuse_an_import_without_data(a.checkpoint[0])
        cfg = _saved_config(a.checkpoint[0])
        if a.compare and not a.direction and cfg is not None and cfg.data.directions:
            raise NmtError("--compare draws one report: give --direction SRC-TGT")
    opts = EvalOptions(
        split=a.split,
        src_file=a.src,
        ref_file=a.ref,
        beam=a.beam,
        report_dir=a.report,
        buckets=a.buckets,
        attention_plots=a.attention_plots,
        attn_layer=a.attention_layer,
        attn_head=a.attention_head,
        device=a.device,
        progress=sys.stderr.isatty(),
        overrides=decode_overrides(a),
        int8=a.int8,
        metrics=a.metrics,
        bootstrap=a.bootstrap,
        comet_model=a.comet_model,
        verbose=a.verbose,
        constraints_file=a.constraints,
        direction=a.direction,
        pivot=a.pivot,
    )
    lower = "--batch-tokens, --beam, or the number and length of constraint phrases"
    return decoding_within_memory(lambda: _evaluate_and_print(a, opts), lower)


def _evaluate_and_print(a: argparse.Namespace, opts) -> int:
    """Evaluate and print the report (or a multilingual model's table of directions)."""
    from nmt.jobs.evaluate_directions import evaluate_run

    done = evaluate_run(a.checkpoint, opts)
    if done.summary is not None:
        print(f"checkpoint: {done.meta['path']} (step {done.meta['step']})")
        print(done.table, end="")
        print("".join(f"report: {report}\n" for _, report in done.reports), end="")
        print(f"table: {done.summary} (and .json)")
        return 0
    _print_report(a, *done.reports[0])
    return 0


def _print_report(a: argparse.Namespace, scores: dict, report) -> None:
    """One report's scores, constraints and off-target rate, and a comparison if asked."""
    from nmt.scoring.tables import format_scores

    print(f"checkpoint: {scores['checkpoint']} (step {scores['step']})")
    if "direction" in scores:
        d = scores["direction"]
        how = ("trained" if d["trained"] else "zero-shot") + (
            f", through {d['pivot']} (two passes of the model)" if d["pivot"] else ""
        )
        print(f"direction: {d['name']} ({how})")
    if scores.get("decode", {}).get("language_vocab"):
        n = scores["decode"]["language_vocab"]
        print(f"language vocabulary: pieces seen >= {n} times in the target's training text")
    print(format_scores(scores))
    if "constraints" in scores:
        from nmt.data.constraints_file import describe_record

        print(describe_record(scores["constraints"]))
    if "off_target" in scores:
        from nmt.data.language_id import describe_off_target

        print(describe_off_target(scores["off_target"]))
    print(f"report: {report}")
    if a.compare:
        from nmt.scoring.compare import compare_reports

        table = compare_reports([str(report), *a.compare], report / "compare")
        print(table)
        print(f"comparison: {report / 'compare'}")


def _saved_config(target: str):
    """The config saved with the run of `target` (None where there is none to read)."""
    from nmt.checkpoint import resolve
    from nmt.run_dir import RunDir

    try:
        return RunDir.of_checkpoint(resolve(target)).saved_config()
    except NmtError:
        return None  # evaluate names the problem


def _refuse_an_import_without_data(target: str) -> None:
    """An imported model's run (`nmt import`) has a placeholder data section (RUN/data): say it
    needs --src/--ref, rather than that RUN/data is missing. Checked from the run's config first,
    so a run with its data pays no checkpoint read."""
    from pathlib import Path

    from nmt.checkpoint import imported_from, resolve

    cfg = _saved_config(target)
    if cfg is None or cfg.data.source != "local" or Path(cfg.data.path).is_dir():
        return
    origin = imported_from(resolve(target))
    if origin is not None:
        raise NmtError(
            f"{target} is a model imported from {origin} and has no data of its own "
            f"(data.path {cfg.data.path} is a placeholder): evaluate it on files with "
            f"--src FILE --ref FILE"
        )
