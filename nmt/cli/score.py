"""`nmt score`: forced-decoding log-probabilities of given translations."""

from __future__ import annotations

import argparse

from nmt.cli.options import decode_overrides, language_args, positive


def register(sub: "argparse._SubParsersAction") -> None:
    sc = sub.add_parser(
        "score",
        help="log-probabilities of given translations",
        description="Forced decoding: for each source/reference pair, one JSON "
        "line {score, norm_score, tokens, token_log_probs} (natural log; EOS "
        "included; norm_score divides by the GNMT length penalty as beam search "
        "does). A multilingual model scores the references in the language --tgt-lang "
        "names, tagged as nmt translate --tgt-lang tags them: with data.tag: target the "
        "forced tag <2xx> is the first scored token (beam search counts it too), so the "
        "scores equal those nmt translate --nbest prints.",
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
    sc.add_argument("--batch-tokens", type=positive, help="source tokens per batch")
    language_args(
        sc,
        tgt_help="the language of --ref: required for a multilingual model (one of its target "
        "languages); a one-direction model takes only its own",
        src_help="the language of --src, checked against the languages the model reads",
        pivot=False,
    )
    sc.add_argument(
        "--device",
        default=None,
        help="cpu, cuda or cuda:N (default: the run's "
        "training device where this machine has it, else cpu)",
    )
    sc.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    from nmt.jobs.translate import score
    from nmt.logs import setup_logging

    setup_logging()
    return score(
        a.checkpoint,
        a.src,
        a.ref,
        a.output,
        a.device,
        decode_overrides(a),
        tgt_lang=a.tgt_lang,
        src_lang=a.src_lang,
    )
