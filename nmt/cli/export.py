"""`nmt export`: a Transformer run for another engine (CTranslate2, Hugging Face `transformers`)."""

from __future__ import annotations

import argparse


def register(sub: "argparse._SubParsersAction") -> None:
    x = sub.add_parser(
        "export",
        help="export a Transformer run to another engine (CTranslate2, Hugging Face)",
        description="Write a CTranslate2 model directory (model.bin, config.json, "
        "vocabularies, the run's sentencepiece model(s), nmt_export.json) for a "
        "Transformer checkpoint or run directory (its best checkpoint); with --format hf, a "
        "MarianMTModel and MarianTokenizer directory that transformers loads.",
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
    x.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    if a.format == "hf":
        from nmt.export.hf import run as export_hf

        return export_hf(a)
    from nmt.export.ctranslate2 import export_ctranslate2

    out = export_ctranslate2(a.checkpoint, a.output, a.quantization, a.overwrite)
    print(f"CTranslate2 model: {out}")
    return 0
