"""Tiny Hugging Face Marian models built locally (no network) for the import/export tests."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import sentencepiece as spm
import torch

from nmt.config import SyntheticConfig
from nmt.data.synthetic import write_corpus
from nmt.importers.spm_order import CONTROL, UNKNOWN, model_pieces


def synthetic_corpus(root: Path, train: int = 400, test: int = 40) -> Path:
    cfg = replace(SyntheticConfig(), train=train, valid=20, test=test, lexicon=30, max_words=12)
    write_corpus(root, replace(cfg, seed=3))
    return root


def _spm(lines: list[str], size: int) -> bytes:
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=buf,
        vocab_size=size,
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=1,
    )
    return buf.getvalue()


def marian_dir(
    out: Path,
    corpus: Path,
    activation: str = "swish",
    seed: int = 0,
    share: bool = True,
    control_pieces: bool = False,
) -> Path:
    """save_pretrained output of a random MarianMTModel (2 layers, d 32, non-zero
    final_logits_bias) and its MarianTokenizer: source and target sentencepiece models trained
    on the corpus, one joint vocab.json (</s>=0, <unk>=1, pieces, <pad>=last) as OPUS-MT has.
    `share`: one embedding table for encoder and decoder; `control_pieces`: vocab.json also
    lists the sentencepiece models' <s>, as a vocabulary built from every piece id would."""
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    raw = out.parent / f"{out.name}.raw"
    raw.mkdir(parents=True, exist_ok=True)
    protos = {}
    for side, name in (("src", "source.spm"), ("tgt", "target.spm")):
        lines = (corpus / f"train.{side}").read_text("utf-8").splitlines()
        protos[side] = _spm(lines, 120)
        (raw / name).write_bytes(protos[side])
    pieces: list[str] = []
    for proto in protos.values():
        for p, (_, kind) in model_pieces(proto).items():
            wanted = kind not in (CONTROL, UNKNOWN) or (control_pieces and p == "<s>")
            if wanted and p not in pieces:
                pieces.append(p)
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    vocab["<pad>"] = len(vocab)
    (raw / "vocab.json").write_text(json.dumps(vocab), "utf-8")
    tok = MarianTokenizer(str(raw / "source.spm"), str(raw / "target.spm"), str(raw / "vocab.json"))
    V, pad = len(vocab), vocab["<pad>"]
    config = MarianConfig(
        vocab_size=V,
        decoder_vocab_size=V,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        activation_function=activation,
        max_position_embeddings=256,
        scale_embedding=True,
        share_encoder_decoder_embeddings=share,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
        init_std=0.3,  # peaked distributions: greedy choices are far from ties
        bad_words_ids=[[pad]],
        num_beams=4,
        max_length=256,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 1.0)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
