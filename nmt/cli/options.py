"""Argument types and the decoding options `evaluate`, `translate` and `score` share."""

from __future__ import annotations

import argparse
import sys
import typing
from typing import Callable

from nmt.config.schema import SEED_MAX, Metric
from nmt.errors import NmtError


def ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def int_at_least(lo: int, hi: int = 2**63 - 1) -> Callable[[str], int]:
    """An argparse type: an integer >= lo (and <= hi: int64's top by default)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {v}")
        if v > hi:
            shown = text if len(text) <= 30 else text[:27] + "..."
            raise argparse.ArgumentTypeError(f"expected an integer <= {hi}, got {shown}")
        return v

    return parse


positive, count, seed = int_at_least(1), int_at_least(0), int_at_least(0, SEED_MAX)


def metrics(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(x.strip().lower() for x in text.split(",") if x.strip()))
    known = typing.get_args(Metric)
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"expected metrics from {', '.join(known)}, got {text!r}")
    return names


def decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=positive, help="beam size (1 = greedy; default: decode.beam)")
    p.add_argument("--alpha", type=float, help="GNMT length penalty (default: decode.alpha)")
    p.add_argument("--batch-tokens", type=positive, help="source tokens per decoding batch")
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
        type=count,
        metavar="N",
        help="never repeat an n-gram of N tokens (default: decode.no_repeat_ngram)",
    )
    language_vocab_arg(p)
    constraint_limit_args(p)
    g = p.add_argument_group("sampling (instead of search; --nbest K draws K samples)")
    g.add_argument(
        "--sample", action="store_true", default=None, help="sample each token instead of searching"
    )
    g.add_argument("--temperature", type=float, help="divide log-probs by T (default 1)")
    g.add_argument("--top-k", type=count, metavar="K", help="draw from the K likeliest tokens")
    g.add_argument("--top-p", type=float, metavar="P", help="draw from the nucleus of mass P")
    g.add_argument("--seed", type=seed, help="sampling seed (default: decode.seed)")


def language_vocab_arg(p: argparse.ArgumentParser) -> None:
    """--language-vocab N (decode.language_vocab): translate, evaluate and serve take it."""
    p.add_argument(
        "--language-vocab",
        type=count,
        metavar="N",
        help="write only pieces seen at least N times in the target language's training text "
        "(reads the run's data; keeps zero-shot output in the asked language; default: "
        "decode.language_vocab)",
    )


def constraint_limit_args(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """--max-phrases, --max-phrase-words, --max-phrase-tokens (decode.max_phrases...): the
    limits on lexical constraints, over the run's decode config; translate, evaluate and serve
    take them (docs/terminology.md#limits). The group, for serve's request limit."""
    g = p.add_argument_group("limits on constraints (more is refused before decoding)")
    for flag, what, key in (
        ("--max-phrases", "phrases per sentence, included and excluded", "max_phrases, 16"),
        ("--max-phrase-words", "words per phrase", "max_phrase_words, 8"),
        ("--max-phrase-tokens", "target subword tokens per phrase", "max_phrase_tokens, 24"),
    ):
        g.add_argument(flag, type=positive, metavar="N", help=f"{what} (default: decode.{key})")
    return g


TRANSLATE_TGT_HELP = (
    "the language to translate into: required for a multilingual model (one of its target "
    "languages); a one-direction model takes only its own"
)
TRANSLATE_SRC_HELP = (
    "the input's language, checked against the languages the model reads (the model needs only "
    "the target's tag)"
)


def language_args(
    p: argparse.ArgumentParser,
    tgt_help: str = TRANSLATE_TGT_HELP,
    src_help: str = TRANSLATE_SRC_HELP,
    pivot: bool = True,
) -> None:
    """The languages of a model of several directions (data.directions): `nmt translate`'s, or
    with other help texts and no --pivot, `nmt score`'s."""
    g = p.add_argument_group("languages (a multilingual model)")
    g.add_argument("--tgt-lang", metavar="LANG", help=tgt_help)
    g.add_argument("--src-lang", metavar="LANG", help=src_help)
    if pivot:
        pivot_arg(g)


def pivot_arg(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument(
        "--pivot",
        metavar="LANG",
        help="translate through this language with the same model: source -> LANG, then "
        "LANG -> target (two passes; for directions the model was not trained on)",
    )


def decode_overrides(a: argparse.Namespace) -> dict:
    """decode.* options given on the command line (checked by the config loader)."""
    if getattr(a, "alpha", None) is not None and a.alpha < 0:
        raise NmtError(f"--alpha must be >= 0, got {a.alpha}")
    keys = (
        "alpha",
        "batch_tokens",
        "no_repeat_ngram",
        "language_vocab",
        "max_phrases",
        "max_phrase_words",
        "max_phrase_tokens",
        "sample",
        "temperature",
        "top_k",
        "top_p",
        "seed",
    )
    return {k: getattr(a, k) for k in keys if getattr(a, k, None) is not None}


def out_of_memory(err: BaseException) -> bool:
    """Whether `err` is the machine running out of memory (host or GPU), not a bug."""
    if isinstance(err, MemoryError):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and (
        "can't allocate memory" in text or "out of memory" in text.lower()
    )


def decoding_within_memory(work: Callable[[], int], lower: str) -> int:
    """`work()`, or when it runs out of memory one line naming what to lower and exit 1 (the
    machine's limit, not the user's mistake nor a bug: no traceback)."""
    try:
        return work()
    except (MemoryError, RuntimeError) as err:
        if not out_of_memory(err):
            raise
        print(f"nmt: error: out of memory while decoding; lower {lower}", file=sys.stderr)
        return 1
