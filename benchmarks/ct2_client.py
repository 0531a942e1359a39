#!/usr/bin/env python
"""A standalone CTranslate2 client for an `nmt export --format ctranslate2` directory: the peer
that `nmt translate` is timed against as a whole process (`benchmark_process.py`).

    python benchmarks/ct2_client.py CT2_DIR -i SRC -o OUT [--beam 5] [--threads 2]

It imports only ctranslate2 and sentencepiece, as a user's own CTranslate2 script would, so its
start-up is CTranslate2's, not nmt's or torch's. It decodes the way `nmt translate` does (the
settings are the export's nmt_export.json): the same subwords and input truncation, each
sentence's own output limit floor(max_len_a * (pieces + 1) + max_len_b) (CTranslate2 takes one
limit per call, so sentences are grouped by limit), PAD and BOS never generated, blank lines
blank, `<unk>` left out of the text.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import ctranslate2
import sentencepiece as spm

PAD, BOS, EOS = 0, 2, 3  # nmt's sentencepiece ids (nmt.data.tokenizer); UNK is 1


def load_tokenizers(d: Path) -> tuple[spm.SentencePieceProcessor, spm.SentencePieceProcessor]:
    """The run's sentencepiece model(s) as the export copied them."""
    if (d / "spm.model").exists():
        joint = spm.SentencePieceProcessor(model_file=str(d / "spm.model"))
        return joint, joint
    if (d / "spm.src.model").exists():
        src = spm.SentencePieceProcessor(model_file=str(d / "spm.src.model"))
        return src, spm.SentencePieceProcessor(model_file=str(d / "spm.tgt.model"))
    sys.exit(f"error: {d} holds no spm.model or spm.src.model: not an `nmt export` directory")


def translate(
    translator: ctranslate2.Translator,
    src_sp: spm.SentencePieceProcessor,
    tgt_sp: spm.SentencePieceProcessor,
    lines: list[str],
    info: dict,
    beam: int,
) -> list[str]:
    dec = info["decode"]
    groups: dict[int, list[int]] = {}
    pieces: dict[int, list[str]] = {}
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        text = line.lower() if info.get("lowercase") else line
        p = src_sp.encode(text, out_type=str)[: dec["max_input_tokens"]]
        pieces[i] = p
        limit = math.floor(dec["max_len_a"] * (len(p) + 1) + dec["max_len_b"])
        groups.setdefault(limit, []).append(i)
    banned = [[tgt_sp.id_to_piece(PAD)], [tgt_sp.id_to_piece(BOS)]]
    out = [""] * len(lines)
    for limit, members in sorted(groups.items()):
        results = translator.translate_batch(
            [pieces[i] for i in members],
            beam_size=beam,
            length_penalty=dec["alpha"],
            max_decoding_length=limit,
            min_decoding_length=0,
            suppress_sequences=banned,
            max_batch_size=dec["batch_tokens"],
            batch_type="tokens",
        )
        for i, r in zip(members, results):
            ids = [tgt_sp.piece_to_id(p) for p in r.hypotheses[0]]
            out[i] = tgt_sp.decode([t for t in ids if t > EOS])  # as nmt: no <unk> in the text
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="an `nmt export --format ctranslate2` directory")
    ap.add_argument("-i", "--input", required=True)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--compute-type", default="default", help="float32, int8, ... (default: the model's)"
    )
    a = ap.parse_args(argv)
    d = Path(a.model)
    if not (d / "nmt_export.json").is_file():
        sys.exit(
            f"error: {d} has no nmt_export.json: not an `nmt export --format ctranslate2` directory"
        )
    info = json.loads((d / "nmt_export.json").read_text("utf-8"))
    src_sp, tgt_sp = load_tokenizers(d)
    translator = ctranslate2.Translator(
        str(d), device="cpu", inter_threads=1, intra_threads=a.threads, compute_type=a.compute_type
    )
    lines = Path(a.input).read_text("utf-8").splitlines()
    hyps = translate(translator, src_sp, tgt_sp, lines, info, a.beam)
    Path(a.output).write_text("".join(h + "\n" for h in hyps), "utf-8")


if __name__ == "__main__":
    main()
