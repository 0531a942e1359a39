"""`nmt` command line: train, evaluate, translate, compare, study, data.

User mistakes (NmtError) and failures of the machine (OSError: disk full, permission denied) print
one line `nmt: error: ...` and exit with code 2; only bugs show a traceback. A training run stopped
by SIGINT/SIGTERM exits 128 + the signal number (130, 143), never 0: it is checkpointed, not done.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from nmt import __version__
from nmt.errors import NmtError
from nmt.importers.command import add_import_parser
from nmt.importers.command import run as import_command


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def _int_at_least(lo: int):
    """An argparse type: an integer >= lo."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {v}")
        return v

    return parse


_positive, _count = _int_at_least(1), _int_at_least(0)


def _metrics(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(x.strip().lower() for x in text.split(",") if x.strip()))
    bad = [n for n in names if n not in ("bleu", "chrf", "ter")]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"expected metrics from bleu, chrf, ter, got {text!r}")
    return names


def _decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=_positive, help="beam size (1 = greedy; default: decode.beam)")
    p.add_argument("--alpha", type=float, help="GNMT length penalty (default: decode.alpha)")
    p.add_argument("--batch-tokens", type=_positive, help="source tokens per decoding batch")
    p.add_argument(
        "--device",
        default=None,
        help="cpu, cuda or cuda:N (default: the run's training device where this "
        "machine has it, else cpu)",
    )
    p.add_argument(
        "--int8",
        action="store_true",
        help="dynamic int8 quantization of the linear layers (CPU only)",
    )
    p.add_argument(
        "--no-repeat-ngram",
        type=_count,
        metavar="N",
        help="never repeat an n-gram of N tokens (default: decode.no_repeat_ngram)",
    )
    g = p.add_argument_group("sampling (instead of search; --nbest K draws K samples)")
    g.add_argument(
        "--sample", action="store_true", default=None, help="sample each token instead of searching"
    )
    g.add_argument("--temperature", type=float, help="divide log-probs by T (default 1)")
    g.add_argument("--top-k", type=_count, metavar="K", help="draw from the K likeliest tokens")
    g.add_argument("--top-p", type=float, metavar="P", help="draw from the nucleus of mass P")
    g.add_argument("--seed", type=int, help="sampling seed (default: decode.seed)")


def _toolbox_parsers(sub) -> None:
    av = sub.add_parser(
        "average",
        help="average the parameters of several checkpoints",
        description="Average model parameters (in fp32) of the last N step "
        "checkpoints of a run, or of the given checkpoints, into one checkpoint "
        "usable wherever a checkpoint is.",
    )
    av.add_argument(
        "checkpoints",
        nargs="+",
        metavar="RUN_OR_CKPT",
        help="a run directory with --last, else checkpoint files",
    )
    av.add_argument("--last", type=_positive, metavar="N", help="the run's last N step checkpoints")
    av.add_argument("-o", "--output", required=True, help="checkpoint to write")

    sc = sub.add_parser(
        "score",
        help="log-probabilities of given translations",
        description="Forced decoding: for each source/reference pair, one JSON "
        "line {score, norm_score, tokens, token_log_probs} (natural log; EOS "
        "included; norm_score divides by the GNMT length penalty as beam search "
        "does).",
    )
    sc.add_argument(
        "checkpoint",
        nargs="+",
        help="checkpoint file or run directory; several are scored as one ensemble",
    )
    sc.add_argument("--src", required=True, help="source file")
    sc.add_argument("--ref", required=True, help="target file, line-aligned with --src")
    sc.add_argument("-o", "--output", help="output file (default: stdout)")
    sc.add_argument("--alpha", type=float, help="length penalty of norm_score (decode.alpha)")
    sc.add_argument("--batch-tokens", type=_positive, help="source tokens per batch")
    sc.add_argument(
        "--device",
        default=None,
        help="cpu, cuda or cuda:N (default: the run's "
        "training device where this machine has it, else cpu)",
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="nmt",
        description="Neural machine translation from YAML configs: seq2seq, RNNsearch "
        "(Bahdanau attention) and Transformer, with BLEU by sentence length.",
        epilog="Run 'nmt COMMAND --help' for the options of each command.",
    )
    ap.add_argument("--version", action="version", version=f"nmt {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for add in (
        _train_parser,
        _evaluate_parser,
        _translate_parser,
        _toolbox_parsers,
        _compare_parser,
        _study_parser,
        _export_parser,
        _prepare_parser,
        _data_parser,
        _serve_parser,
        add_import_parser,
    ):
        add(sub)
    return ap


def _train_parser(sub) -> None:
    t = sub.add_parser(
        "train",
        help="train a model from a YAML config",
        description="Train a model. Under torchrun the same command trains with "
        "DistributedDataParallel: torchrun --nproc_per_node=N -m nmt train CONFIG",
    )
    t.add_argument("config", help="YAML config file")
    t.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set train.lr=0.0005 (repeatable)",
    )
    t.add_argument("--resume", action="store_true", help="continue the run in train.run_dir")
    t.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    t.add_argument(
        "--dry-run",
        action="store_true",
        help="load data, train subwords, build batches, print statistics; no training",
    )


def _evaluate_parser(sub) -> None:
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
        "--report",
        help="report directory (default: RUN/eval_SPLIT_beamK, or "
        "RUN/eval_file_NAME_beamK for --src NAME.xx)",
    )
    e.add_argument(
        "--buckets",
        type=_ints,
        help="bucket upper bounds in source words, e.g. 10,20,30,40,50 (default: eval.buckets)",
    )
    _report_args(e)
    _decode_args(e)


def _report_args(e: argparse.ArgumentParser) -> None:
    """`nmt evaluate` options of what the report holds: plots, metrics, intervals."""
    e.add_argument(
        "--attention-plots",
        type=_count,
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
        type=_metrics,
        default=("bleu", "chrf"),
        help="comma-separated sacreBLEU metrics: bleu, chrf, ter (default: bleu,chrf)",
    )
    e.add_argument(
        "--bootstrap",
        type=_count,
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


def _translate_parser(sub) -> None:
    tr = sub.add_parser(
        "translate",
        help="translate text with a checkpoint",
        description="Translate lines from a file or stdin: one output line per "
        "input line, in order; blank lines stay blank. With --nbest K > 1, each "
        "input gives exactly K lines 'INDEX ||| HYPOTHESIS ||| SCORE' (INDEX "
        "counts input lines from 0; SCORE is the length-normalised log-"
        "probability, best first); a blank input is not decoded and gives K "
        "entries with an empty hypothesis and score 0.0000. Without -i on a "
        "terminal, translate is interactive: a '> ' prompt, line editing and "
        "history; Ctrl-D ends. Source words the vocabulary does not know are "
        "counted in one warning (--verbose: per line).",
    )
    tr.add_argument(
        "checkpoint",
        nargs="+",
        help="checkpoint file or run directory; several are decoded as one ensemble",
    )
    tr.add_argument("-i", "--input", help="input file (default: stdin)")
    tr.add_argument("-o", "--output", help="output file (default: stdout)")
    tr.add_argument(
        "--nbest",
        type=_positive,
        default=1,
        help="hypotheses per input (<= beam; samples with --sample)",
    )
    tr.add_argument(
        "--prefix",
        metavar="FILE",
        help="target prefixes, one line per input line: each output starts with it",
    )
    tr.add_argument(
        "--alignment",
        action="store_true",
        help="write word alignments from attention: Pharaoh 'i-j' lines to "
        "OUTPUT.align, soft alignments to OUTPUT.align.json (needs -o)",
    )
    tr.add_argument(
        "--verbose",
        action="store_true",
        help="name the source words the vocabulary does not know, line by line",
    )
    _decode_args(tr)


def _compare_parser(sub) -> None:
    c = sub.add_parser(
        "compare",
        help="BLEU-by-length curves of several reports in one plot",
        description="Draw several models' BLEU by source length in one plot and "
        "tables (compare.png, compare.md), with sacreBLEU's paired bootstrap test "
        "of each model against the first, overall and per length bucket "
        "(p-values in compare.md and compare.json, a star in the plot where "
        "p < 0.05). Reports on different test sets are refused.",
    )
    c.add_argument(
        "reports",
        nargs="+",
        metavar="REPORT_OR_RUN",
        help="report directories (holding scores.json) or run directories (their "
        "newest report, or the one --split/--beam pick); the first is the baseline",
    )
    c.add_argument("--out", default="compare", help="output directory (default: ./compare)")
    c.add_argument("--names", help="comma-separated model names (default: run names)")
    c.add_argument("--split", help="in run directories, take the report of this split")
    c.add_argument(
        "--beam", type=_positive, help="in run directories, take the report of this beam"
    )
    c.add_argument(
        "--bootstrap",
        type=_count,
        default=1000,
        metavar="N",
        help="resamples of the paired bootstrap test against the first model "
        "(0: no test; default: 1000)",
    )


def _study_parser(sub) -> None:
    s = sub.add_parser(
        "study",
        help="train and compare several models by sentence length",
        description="Train each model of a study on the same data and budget, "
        "evaluate them with the same decoding and write one report. Resumable: "
        "models already trained in the study directory are skipped.",
    )
    s.add_argument("study", help="study YAML (e.g. configs/study/quick.yaml)")
    s.add_argument("--out", help="study directory (default: the study's out key)")
    s.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key for every model, e.g. --set train.max_minutes=5",
    )


def _export_parser(sub) -> None:
    x = sub.add_parser(
        "export",
        help="export a Transformer run to another engine (CTranslate2, Hugging Face)",
        description="Write a CTranslate2 model directory (model.bin, config.json, "
        "vocabularies, the run's sentencepiece model(s), nmt_export.json) for a "
        "Transformer checkpoint or run directory (its best checkpoint).",
    )
    x.add_argument("checkpoint", help="checkpoint file or run directory")
    x.add_argument("--format", required=True, choices=["ctranslate2", "hf"], help="target format")
    x.add_argument("-o", "--output", required=True, help="output model directory")
    x.add_argument(
        "--quantization",
        choices=["int8", "int8_float32", "float16"],
        help="weight quantization (default: float32)",
    )
    x.add_argument("--overwrite", action="store_true", help="replace an existing directory")


def _prepare_parser(sub) -> None:
    pr = sub.add_parser(
        "prepare",
        help="encode the training split once into a cached, "
        "memory-mapped corpus (nmt train does this on first use)",
        description="Read the training split, train the subword models, encode "
        "and filter it with data.workers processes, and store ids and lengths as "
        "Arrow files under data.prepared_dir, keyed by the data and vocab "
        "sections. Every run with the same data and vocab reuses them.",
    )
    pr.add_argument("config", help="YAML config file")
    pr.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set data.workers=4 (repeatable)",
    )


def _data_parser(sub) -> None:
    d = sub.add_parser("data", help="data utilities")
    dsub = d.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    _synth_args(dsub)


def _serve_parser(sub) -> None:
    sv = sub.add_parser(
        "serve",
        help="HTTP translation server with a page showing the attention",
        description="Serve a checkpoint or run directory over HTTP: POST "
        "/v1/translate, GET /v1/model, GET /v1/health, the page at / and the "
        'OpenAPI schema at /docs. Needs the serve extra: pip install -e ".[serve]"',
    )
    sv.add_argument("checkpoint", help="checkpoint file or run directory")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    sv.add_argument("--port", type=_count, default=8000, help="port (default: 8000)")
    sv.add_argument(
        "--max-batch-tokens",
        type=_count,
        default=2000,
        metavar="N",
        help="padded source tokens per merged batch; 0 = no merging (default: 2000)",
    )
    sv.add_argument(
        "--max-wait-ms",
        type=float,
        default=10.0,
        metavar="M",
        help="how long a request waits for others to share its batch (default: 10)",
    )
    sv.add_argument(
        "--queue",
        type=_positive,
        default=256,
        metavar="N",
        help="requests waiting before the server answers 503 (default: 256)",
    )
    sv.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds per request, queueing included, before 504 (default: 60)",
    )
    sv.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    sv.add_argument(
        "--precision",
        default=None,
        choices=["fp32", "bf16", "fp16"],
        help="decoding precision (default: as nmt translate: fp32 on a CPU, the run's on a GPU)",
    )
    sv.add_argument(
        "--int8",
        action="store_true",
        help="dynamic int8 quantization of the linear layers (CPU only)",
    )


def _synth_args(dsub) -> None:
    from nmt.config import SyntheticConfig

    default = SyntheticConfig()
    syn = dsub.add_parser(
        "synth",
        help="write the built-in synthetic corpus as text files",
        description="Write the built-in synthetic corpus (the one 'data.source: synthetic' "
        "generates) as line-aligned files OUT/{train,valid,test}.{SRC_LANG,TGT_LANG}, for "
        "'data.source: local' or other tools. The same options give the same files.",
    )
    syn.add_argument("--out", required=True, help="output directory (created if missing)")
    dflt = " (default: %(default)s)"
    syn.add_argument("--train", type=_positive, default=50000, help="training pairs" + dflt)
    syn.add_argument("--valid", type=_positive, default=1000, help="validation pairs" + dflt)
    syn.add_argument("--test", type=_positive, default=3000, help="test pairs" + dflt)
    syn.add_argument("--seed", type=int, default=1, help="seed of lexicon and sentences" + dflt)
    syn.add_argument(
        "--lexicon",
        type=_positive,
        default=default.lexicon,
        help="content words in the lexicon (nouns, verbs, adjectives)" + dflt,
    )
    syn.add_argument("--src-lang", default="src", help="file suffix of the source side" + dflt)
    syn.add_argument("--tgt-lang", default="tgt", help="file suffix of the target side" + dflt)
    syn.add_argument(
        "--overwrite",
        action="store_true",
        help="replace corpus files already in --out (refused otherwise)",
    )


def cmd_train(a: argparse.Namespace) -> int:
    from nmt import pipeline
    from nmt.config import load_config

    cfg = load_config(a.config, a.set)
    pipeline.setup_logging()
    if a.dry_run:
        print(pipeline.data_report(cfg, progress=sys.stderr.isatty(), where=a.config))
        return 0
    result = pipeline.train(
        cfg,
        overwrite=a.overwrite,
        resume=a.resume,
        where=a.config,
        progress_bar=sys.stderr.isatty(),
    )
    print(f"run directory: {result.run}")
    if result.interrupted:
        return _interrupted(a, result)
    return 0


def _interrupted(a: argparse.Namespace, result) -> int:
    """Say where the work is and how to continue it; exit as a process killed by the signal
    would (128 + its number: 130 for SIGINT, 143 for SIGTERM), so a scheduler can tell a
    preempted run from a finished one."""
    import os
    import re
    import shlex
    import signal

    from nmt.checkpoint import step_checkpoints

    found = re.search(r"SIG[A-Z]+", result.stop_reason)
    sig = signal.Signals[found.group()] if found else signal.SIGTERM  # signalled elsewhere
    if os.environ.get("RANK", "0") == "0":
        ckpts = step_checkpoints(result.run)
        where = ckpts[-1] if ckpts else result.run
        cmd = ["nmt", "train", a.config, *(f"--set={kv}" for kv in a.set), "--resume"]
        print(
            f"nmt: training {result.stop_reason}; checkpoint saved at {where}\n"
            f"nmt: continue with: {shlex.join(cmd)}",
            file=sys.stderr,
        )
    return 128 + sig.value


def cmd_prepare(a: argparse.Namespace) -> int:
    from nmt import pipeline
    from nmt.config import load_config
    from nmt.data.prepared import ensure_prepared, open_prepared

    cfg = load_config(a.config, a.set)
    pipeline.setup_logging()
    path, built = ensure_prepared(cfg, progress=sys.stderr.isatty())
    print(("prepared now" if built else "already prepared") + "; " + open_prepared(path).summary())
    return 0


def _decode_overrides(a: argparse.Namespace) -> dict:
    """decode.* options given on the command line (checked by the config loader)."""
    if getattr(a, "alpha", None) is not None and a.alpha < 0:
        raise NmtError(f"--alpha must be >= 0, got {a.alpha}")
    keys = (
        "alpha",
        "batch_tokens",
        "no_repeat_ngram",
        "sample",
        "temperature",
        "top_k",
        "top_p",
        "seed",
    )
    return {k: getattr(a, k) for k in keys if getattr(a, k, None) is not None}


def cmd_evaluate(a: argparse.Namespace) -> int:
    from nmt import pipeline
    from nmt.report import format_scores

    pipeline.setup_logging()
    opts = pipeline.EvalOptions(
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
        overrides=_decode_overrides(a),
        int8=a.int8,
        metrics=a.metrics,
        bootstrap=a.bootstrap,
        comet_model=a.comet_model,
        verbose=a.verbose,
    )
    scores, report = pipeline.evaluate(a.checkpoint, opts)
    print(f"checkpoint: {scores['checkpoint']} (step {scores['step']})")
    print(format_scores(scores))
    print(f"report: {report}")
    if a.compare:
        from nmt.compare import compare_reports

        table = compare_reports([str(report), *a.compare], report / "compare")
        print(table)
        print(f"comparison: {report / 'compare'}")
    return 0


def cmd_translate(a: argparse.Namespace) -> int:
    from nmt import pipeline
    from nmt.data.corpus import read_lines, split_lines

    pipeline.setup_logging()
    if a.alignment and not a.output:
        raise NmtError(
            "--alignment needs -o FILE (alignments go to FILE.align and FILE.align.json)"
        )
    session = pipeline.open_session(
        a.checkpoint, a.beam, a.nbest, a.device, _decode_overrides(a), int8=a.int8
    )
    if a.input is None and sys.stdin.isatty():
        if a.prefix or a.alignment:
            raise NmtError("--prefix and --alignment need an input file (-i FILE) or piped input")
        _interactive(session)
        return 0
    lines = read_lines(a.input) if a.input else split_lines(sys.stdin.buffer.read(), "stdin")
    return pipeline.translate(
        session,
        lines,
        a.input or "stdin",
        a.output,
        prefix_path=a.prefix,
        alignment=a.alignment,
        verbose=a.verbose,
        progress=a.input is not None and sys.stderr.isatty(),
    )


def _interactive(session) -> None:
    """One sentence per line from a terminal: a prompt, line editing and history (readline)."""
    from nmt.unknown_words import warn_unknown

    try:
        import readline  # noqa: F401  (importing it gives input() line editing)
    except ImportError:  # not on every platform (Windows): plain input() still works
        pass
    print("nmt: interactive mode, one sentence per line, Ctrl-D to end", file=sys.stderr)
    prompt = "> " if sys.stdout.isatty() else ""
    i = 0
    while True:
        try:
            line = input(prompt)
        except EOFError:
            if prompt:
                print()
            return
        warn_unknown(session.tok, [line], "stdin", verbose=True, first_line=i + 1)
        (t,) = session.translate([line], "stdin")
        print("\n".join(session.output_lines(t, i)), flush=True)
        i += 1


def cmd_average(a: argparse.Namespace) -> int:
    from nmt.checkpoint import average_checkpoints, checkpoints_to_average

    paths = checkpoints_to_average(a.checkpoints, a.last)
    average_checkpoints(paths, a.output)
    print(f"averaged {len(paths)} checkpoint(s) -> {a.output}")
    return 0


def cmd_score(a: argparse.Namespace) -> int:
    from nmt import pipeline

    pipeline.setup_logging()
    return pipeline.score(a.checkpoint, a.src, a.ref, a.output, a.device, _decode_overrides(a))


def cmd_compare(a: argparse.Namespace) -> int:
    from nmt.compare import compare_reports

    names = [n.strip() for n in a.names.split(",")] if a.names else None
    print(
        compare_reports(a.reports, a.out, names, split=a.split, beam=a.beam, n_samples=a.bootstrap)
    )
    print(f"plot: {Path(a.out) / 'compare.png'}")
    return 0


def cmd_study(a: argparse.Namespace) -> int:
    from nmt import pipeline
    from nmt.study import run_study

    pipeline.setup_logging()
    out = run_study(a.study, a.out, a.set)
    print((out / "study.md").read_text(encoding="utf-8"))
    print(f"study report: {out}")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    if a.format == "hf":
        from nmt.export.hf import run

        return run(a)
    from nmt.export.ctranslate2 import export_ctranslate2

    out = export_ctranslate2(a.checkpoint, a.output, a.quantization, a.overwrite)
    print(f"CTranslate2 model: {out}")
    return 0


def cmd_data(a: argparse.Namespace) -> int:
    from dataclasses import replace

    from nmt.config import SyntheticConfig
    from nmt.data.synthetic import write_corpus

    cfg = replace(
        SyntheticConfig(), train=a.train, valid=a.valid, test=a.test, seed=a.seed, lexicon=a.lexicon
    )
    files = [
        Path(a.out) / f"{split}.{lang}"
        for split in ("train", "valid", "test")
        for lang in (a.src_lang, a.tgt_lang)
    ]
    existing = [f.name for f in files if f.exists()]
    if existing and not a.overwrite:
        raise NmtError(
            f"{a.out} already holds {', '.join(existing)}; pass --overwrite to replace them"
        )
    counts = write_corpus(a.out, cfg, a.src_lang, a.tgt_lang)
    for split, n in counts.items():
        print(
            f"{split}: {n} pairs -> {Path(a.out) / f'{split}.{a.src_lang}'}, "
            f"{Path(a.out) / f'{split}.{a.tgt_lang}'}"
        )
    return 0


def cmd_serve(a: argparse.Namespace) -> int:
    try:
        import uvicorn

        from nmt.serve.app import Limits, create_app
    except ImportError as e:
        raise NmtError(
            f"nmt serve needs the serve extra ({e.name} is not installed): "
            f'pip install -e ".[serve]"'
        ) from None
    from nmt import pipeline
    from nmt.api import Translator

    if a.max_wait_ms < 0 or a.timeout <= 0:
        raise NmtError("--max-wait-ms must be >= 0 and --timeout > 0")
    pipeline.setup_logging()
    translator = Translator.load(a.checkpoint, device=a.device, precision=a.precision, int8=a.int8)
    limits = Limits(
        max_batch_tokens=a.max_batch_tokens,
        max_wait_ms=a.max_wait_ms,
        queue=a.queue,
        timeout_s=a.timeout,
    )
    print(f"nmt serve: {translator.info.checkpoint} on http://{a.host}:{a.port}/", file=sys.stderr)
    uvicorn.run(create_app(translator, limits), host=a.host, port=a.port, log_level="warning")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if a.command is None:
        parser.print_help()
        return 2
    handlers = {
        "train": cmd_train,
        "evaluate": cmd_evaluate,
        "translate": cmd_translate,
        "compare": cmd_compare,
        "study": cmd_study,
        "serve": cmd_serve,
        "export": cmd_export,
        "prepare": cmd_prepare,
        "average": cmd_average,
        "score": cmd_score,
        "data": cmd_data,
        "import": import_command,
    }
    try:
        return handlers[a.command](a)
    except NmtError as err:
        print(f"nmt: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the machine, not a bug: disk full, permission denied, read-only fs
        where = f": {err.filename}" if err.filename else ""
        print(f"nmt: error: {err.strerror or err}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nmt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
