"""`nmt data synth`: write the built-in synthetic corpus as text files."""

from __future__ import annotations

import argparse
from pathlib import Path

from nmt.cli.options import positive


def register(sub: "argparse._SubParsersAction") -> None:
    d = sub.add_parser("data", help="data utilities")
    dsub = d.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    _synth_args(dsub)
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
    syn.add_argument("--seed", type=int, default=1, help="seed of lexicon and sentences" + dflt)
    syn.add_argument(
        "--lexicon",
        type=positive,
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


def run(a: argparse.Namespace) -> int:
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
