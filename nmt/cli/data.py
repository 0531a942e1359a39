"""`nmt data synth`: write the built-in synthetic corpus as text files; `nmt data constraints`:
draw lexical constraints from references, seeded, for a terminology study."""

from __future__ import annotations

import argparse
from pathlib import Path

from nmt.cli.options import count, positive, seed


def register(sub: "argparse._SubParsersAction") -> None:
    d = sub.add_parser("data", help="data utilities")
    dsub = d.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    _synth_args(dsub)
    _constraints_args(dsub)
    d.set_defaults(func=run)


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
    syn.add_argument("--train", type=positive, default=50000, help="training pairs" + dflt)
    syn.add_argument("--valid", type=positive, default=1000, help="validation pairs" + dflt)
    syn.add_argument("--test", type=positive, default=3000, help="test pairs" + dflt)
    syn.add_argument("--seed", type=seed, default=1, help="seed of lexicon and sentences" + dflt)
    syn.add_argument(
        "--lexicon",
        type=positive,
        default=default.lexicon,
        help="content words in the lexicon (nouns, verbs, adjectives)" + dflt,
    )
    langs = "; two of src, tgt and alt write those languages (alt: src respelled)"
    syn.add_argument(
        "--src-lang", default="src", help="file suffix of the source side" + dflt + langs
    )
    syn.add_argument("--tgt-lang", default="tgt", help="file suffix of the target side" + dflt)
    syn.add_argument(
        "--overwrite",
        action="store_true",
        help="replace corpus files already in --out (refused otherwise)",
    )


def _constraints_args(dsub) -> None:
    c = dsub.add_parser(
        "constraints",
        help="draw lexical constraints from reference translations",
        description="Draw phrases of consecutive reference words, one line per reference line "
        "with its phrases separated by TABs (the --constraints format of nmt translate and nmt "
        "evaluate): per line between --min-phrases and --max-phrases phrases of --min-words to "
        "--max-words words, not overlapping, in sentence order; a line too short for them gets "
        "fewer. The same file and seed give the same phrases.",
    )
    dflt = " (default: %(default)s)"
    c.add_argument("--ref", required=True, help="reference file, one sentence per line")
    c.add_argument("--seed", type=seed, default=1, help="seed of the draw" + dflt)
    c.add_argument("--min-phrases", type=count, default=1, help="phrases per line, at least" + dflt)
    c.add_argument("--max-phrases", type=count, default=3, help="phrases per line, at most" + dflt)
    c.add_argument(
        "--min-words", type=positive, default=1, help="words per phrase, at least" + dflt
    )
    c.add_argument("--max-words", type=positive, default=3, help="words per phrase, at most" + dflt)
    c.add_argument(
        "--exclude-from",
        metavar="FILE",
        help="also keep out one word per line, drawn from the same line of FILE (e.g. the "
        "translations without constraints; never a word inside that line's phrases): such lines "
        'are written in the JSON form {"include": [...], "exclude": [WORD]}',
    )
    c.add_argument("-o", "--output", help="constraints file to write (default: stdout)")


def run(a: argparse.Namespace) -> int:
    if a.data_command == "constraints":
        return _draw(a)
    return _synth(a)


def _draw(a: argparse.Namespace) -> int:
    import sys

    from nmt.data.constraints_file import constraints_line, draw_constraints, draw_exclusions
    from nmt.data.corpus import read_lines
    from nmt.errors import NmtError
    from nmt.files import atomic_write
    from nmt.jobs.translate import check_output

    check_output(a.output)
    refs = read_lines(a.ref)
    drawn = draw_constraints(
        refs, a.seed, (a.min_phrases, a.max_phrases), (a.min_words, a.max_words)
    )
    excluded: list = [None] * len(drawn)
    if a.exclude_from:
        texts = read_lines(a.exclude_from)
        if len(texts) != len(refs):
            raise NmtError(
                f"--exclude-from {a.exclude_from}: {len(texts)} lines, but --ref {a.ref} has "
                f"{len(refs)}; expected one line per reference line"
            )
        excluded = draw_exclusions(drawn, texts, a.seed)
    text = "".join(constraints_line(p, x) + "\n" for p, x in zip(drawn, excluded))
    if a.output:
        atomic_write(a.output, text)
    else:
        sys.stdout.write(text)
    n = sum(map(len, drawn))
    lines = sum(1 for p in drawn if p)
    kept_out = f", {sum(x is not None for x in excluded)} excluded words" if a.exclude_from else ""
    print(
        f"{n} phrases on {lines} of {len(drawn)} lines{kept_out} (seed {a.seed}) -> "
        f"{a.output or 'stdout'}",
        file=sys.stderr,
    )
    return 0


def _synth(a: argparse.Namespace) -> int:
    from dataclasses import replace

    from nmt.config import SyntheticConfig
    from nmt.data.synthetic import write_corpus
    from nmt.files import refuse_to_replace

    cfg = replace(
        SyntheticConfig(), train=a.train, valid=a.valid, test=a.test, seed=a.seed, lexicon=a.lexicon
    )
    files = [
        Path(a.out) / f"{split}.{lang}"
        for split in ("train", "valid", "test")
        for lang in (a.src_lang, a.tgt_lang)
    ]
    refuse_to_replace(files, a.out, a.overwrite)
    counts = write_corpus(a.out, cfg, a.src_lang, a.tgt_lang)
    for split, n in counts.items():
        print(
            f"{split}: {n} pairs -> {Path(a.out) / f'{split}.{a.src_lang}'}, "
            f"{Path(a.out) / f'{split}.{a.tgt_lang}'}"
        )
    return 0
