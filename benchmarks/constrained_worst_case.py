#!/usr/bin/env python
"""How long the costliest translate request within the server's limits takes to decode.

    python benchmarks/constrained_worst_case.py RUN --sentences 4 --phrases 16 --words 80 \
        --src ../shared/data/multi30k/train.de --tgt ../shared/data/multi30k/train.en

SENTENCES sources of WORDS words each (drawn from the 2,000 commonest words of --src), each with
PHRASES included phrases of 8 words (from --tgt's commonest), decoded at --beam (the server's
largest, 16) through the Translator API the server runs, on one thread; seconds in a JSON with
the machine. An untrained run writes every hypothesis to its length limit: the slowest case.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine, write_json  # noqa: E402


def common_words(path: str, n: int = 2000) -> list[str]:
    return [w for w, _ in Counter(Path(path).read_text("utf-8").split()).most_common(n)]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="run directory or checkpoint")
    ap.add_argument("--sentences", type=int, default=4)
    ap.add_argument("--phrases", type=int, default=16, help="included phrases per sentence")
    ap.add_argument("--phrase-words", type=int, default=8)
    ap.add_argument("--words", type=int, default=80, help="words per source sentence")
    ap.add_argument("--beam", type=int, default=16)
    ap.add_argument("--src", required=True, help="text whose common words make the sources")
    ap.add_argument("--tgt", required=True, help="text whose common words make the phrases")
    ap.add_argument("--out", help="JSON file (default: print only)")
    args = ap.parse_args(argv)

    import torch

    from nmt.api import Translator

    torch.set_num_threads(1)
    rng = random.Random(1)
    src, tgt = common_words(args.src), common_words(args.tgt)
    texts = [" ".join(rng.choices(src, k=args.words)) for _ in range(args.sentences)]
    constraints = [
        {"include": [" ".join(rng.choices(tgt, k=args.phrase_words)) for _ in range(args.phrases)]}
        for _ in range(args.sentences)
    ]
    translator = Translator.load(args.run, decode={"beam": args.beam})
    t = time.perf_counter()
    translator.translate(texts, constraints=constraints)
    seconds = time.perf_counter() - t
    out = {
        "command": "python " + " ".join([Path(__file__).name, *(argv or sys.argv[1:])]),
        "machine": machine(),
        "seconds": seconds,
        **{k: getattr(args, k) for k in ("sentences", "phrases", "phrase_words", "words", "beam")},
    }
    print(
        f"{args.sentences} sentences of {args.words} words x {args.phrases} phrases, beam "
        f"{args.beam}: {seconds:.1f} s"
    )
    if args.out:
        write_json(args.out, out)
    return out


if __name__ == "__main__":
    main()
