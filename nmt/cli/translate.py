"""`nmt translate`: lines from a file, a pipe or a terminal prompt."""

from __future__ import annotations

import argparse
import sys

from nmt.cli.options import (
    decode_args,
    decode_overrides,
    decoding_within_memory,
    language_args,
    positive,
)
from nmt.errors import NmtError


def register(sub: "argparse._SubParsersAction") -> None:
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
        type=positive,
        default=1,
        help="hypotheses per input (<= beam; samples with --sample)",
    )
    tr.add_argument(
        "--prefix",
        metavar="FILE",
        help="target prefixes, one line per input line: each output starts with it",
    )
    tr.add_argument(
        "--constraints",
        metavar="FILE",
        help="lexical constraints, one line per input line: TAB-separated phrases the "
        'translation must contain, or a JSON object {"include": [...], "exclude": [...]}; an '
        "empty line constrains nothing (docs/terminology.md)",
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
    language_args(tr)
    decode_args(tr)
    tr.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    from nmt.data.corpus import read_lines, split_lines
    from nmt.jobs.translate import check_output, open_session, translate
    from nmt.logs import setup_logging
    from nmt.text_translation import check_pivot_options

    setup_logging()
    if a.alignment and not a.output:
        raise NmtError(
            "--alignment needs -o FILE (alignments go to FILE.align and FILE.align.json)"
        )
    check_pivot_options(a.pivot, a.alignment, a.constraints, flags=True)  # before loading
    check_output(a.output)  # before the model loads and every line is decoded
    session = open_session(
        a.checkpoint,
        a.beam,
        a.nbest,
        a.device,
        decode_overrides(a),
        int8=a.int8,
        tgt_lang=a.tgt_lang,
        src_lang=a.src_lang,
        pivot=a.pivot,
    )
    if a.input is None and sys.stdin.isatty():
        if a.prefix or a.alignment or a.constraints:
            raise NmtError(
                "--prefix, --constraints and --alignment need an input file (-i FILE) or "
                "piped input"
            )
        _interactive(session)
        return 0
    lines = read_lines(a.input) if a.input else split_lines(sys.stdin.buffer.read(), "stdin")
    return decoding_within_memory(
        lambda: translate(
            session,
            lines,
            a.input or "stdin",
            a.output,
            prefix_path=a.prefix,
            alignment=a.alignment,
            verbose=a.verbose,
            progress=a.input is not None and sys.stderr.isatty(),
            constraints_path=a.constraints,
        ),
        "--batch-tokens, --beam, or the number and length of constraint phrases",
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
