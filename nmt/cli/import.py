"""`nmt import hf MODEL -o RUN`: a pretrained model as an ordinary run (the importer loads on use,
so the CLI starts without torch or transformers). The module is named for its command, as every
command's is; `import` is a keyword, so the CLI loads it with importlib, like the others."""

from __future__ import annotations

import argparse
import os

from nmt.importers import SUPPORTED


def register(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser(
        "import",
        help="import a pretrained model as a run (Hugging Face Marian / OPUS-MT)",
        description="Write a run directory (config.yaml, subword models, best.pt) for a "
        f"pretrained model. Supported: {SUPPORTED}.",
    )
    p.add_argument("format", choices=["hf"], help="where the model comes from")
    p.add_argument("model", help="hub id (e.g. Helsinki-NLP/opus-mt-de-en) or local directory")
    p.add_argument("-o", "--output", required=True, help="run directory to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing directory")
    p.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from nmt.importers.hf import import_hf

    out = import_hf(a.model, a.output, a.overwrite)
    print(f"nmt run: {out} (imported from {a.model})")
    return 0
