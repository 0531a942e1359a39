"""Tiny Hugging Face Marian models built locally (no network) for the import/export tests."""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence

import sentencepiece as spm
import torch

from nmt.config import SyntheticConfig
from nmt.data.synthetic import write_corpus
from nmt.importers.spm_order import CONTROL, UNKNOWN, model_pieces


def synthetic_corpus(root: Path, train: int = 400, test: int = 40) -> Path:
    cfg = replace(SyntheticConfig(), train=train, valid=20, test=test, lexicon=30, max_words=12)
    write_corpus(root, replace(cfg, seed=3))
    return root


def _spm(lines: list[str], size: int, user_defined: Sequence[str] = ()) -> bytes:
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=buf,
        vocab_size=size,
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=1,
        **({"user_defined_symbols": list(user_defined)} if user_defined else {}),
    )
    return buf.getvalue()


def _vocab(protos: list[bytes], control_pieces: bool, codes: Sequence[str] = ()) -> dict[str, int]:
    """vocab.json as OPUS-MT has it: </s>=0, <unk>=1, the language codes `codes` (>>xx<<) of a
    multilingual model, the models' pieces, <pad>=last."""
    pieces: list[str] = list(codes)
    for proto in protos:
        for p, (_, kind) in model_pieces(proto).items():
            wanted = kind not in (CONTROL, UNKNOWN) or (control_pieces and p == "<s>")
            if wanted and p not in pieces:
                pieces.append(p)
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    vocab["<pad>"] = len(vocab)
    return vocab


def _common_piece(proto: bytes, lines: list[str]) -> str:
    sp = spm.SentencePieceProcessor(model_proto=proto)
    counts = Counter(p for line in lines for p in sp.encode(line, out_type=str))
    return counts.most_common(1)[0][0]


def marian_dir(
    out: Path,
    corpus: Path,
    activation: str = "swish",
    seed: int = 0,
    share: bool = True,
    control_pieces: bool = False,
    start: str = "<pad>",
    separate_vocabs: bool = False,
    tie_output: bool = True,
    lang_codes: Sequence[str] = (),
    codes_in_spm: bool = False,
    source_lang: Optional[str] = None,
    **config: Any,
) -> Path:
    """save_pretrained output of a random MarianMTModel (2 layers, d 32, non-zero
    final_logits_bias) and its MarianTokenizer: source and target sentencepiece models trained
    on the corpus, one joint vocab.json (</s>=0, <unk>=1, pieces, <pad>=last) as OPUS-MT has.
    `share`: one embedding table for encoder and decoder; `control_pieces`: vocab.json also
    lists the sentencepiece models' <s>, as a vocabulary built from every piece id would;
    `start`: the vocab entry decoding starts from ("common": the target's most frequent piece);
    `separate_vocabs`: a vocabulary per side (vocab.json, target_vocab.json); `tie_output`:
    false gives an lm_head of its own; `lang_codes`: a multilingual model's target languages,
    each a >>code<< entry of vocab.json that MarianTokenizer splits off the front of a source
    text (OPUS-MT's en-ROMANCE, en-mul...); `codes_in_spm`: the source sentencepiece model also
    holds them, as user-defined pieces; `source_lang`: the tokenizer's; `config`: more MarianConfig options."""
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    raw = out.parent / f"{out.name}.raw"
    raw.mkdir(parents=True, exist_ok=True)
    protos, lines = {}, {}
    # separate vocabularies: a smaller target one, so that its pad id is a source id too
    # (MarianMTModel's encoder embedding takes config.pad_token_id as its padding_idx)
    sizes = {"src": 120, "tgt": 60 if separate_vocabs else 120}
    codes = [f">>{c}<<" for c in lang_codes]
    for side, name in (("src", "source.spm"), ("tgt", "target.spm")):
        lines[side] = (corpus / f"train.{side}").read_text("utf-8").splitlines()
        user = codes if codes_in_spm and side == "src" else ()
        protos[side] = _spm(lines[side], sizes[side], user)
        (raw / name).write_bytes(protos[side])
    if separate_vocabs:
        vocab = _vocab([protos["src"]], control_pieces, codes)
        tgt_vocab = _vocab([protos["tgt"]], control_pieces)
        (raw / "target_vocab.json").write_text(json.dumps(tgt_vocab), "utf-8")
        assert tgt_vocab["<pad>"] < len(vocab)
    else:
        vocab = tgt_vocab = _vocab(list(protos.values()), control_pieces, codes)
    (raw / "vocab.json").write_text(json.dumps(vocab), "utf-8")
    tok = MarianTokenizer(
        str(raw / "source.spm"),
        str(raw / "target.spm"),
        str(raw / "vocab.json"),
        target_vocab_file=str(raw / "target_vocab.json") if separate_vocabs else None,
        separate_vocabs=separate_vocabs,
        source_lang=source_lang,
    )
    pad = tgt_vocab["<pad>"]
    if start == "common":
        start = _common_piece(protos["tgt"], lines["tgt"])
    options = dict(
        vocab_size=len(vocab),
        decoder_vocab_size=len(tgt_vocab),
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
        share_encoder_decoder_embeddings=share and not separate_vocabs,
        tie_word_embeddings=tie_output,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=tgt_vocab[start],
        forced_eos_token_id=0,
        init_std=0.3,  # peaked distributions: greedy choices are far from ties
        bad_words_ids=[[pad]],
        num_beams=4,
        max_length=256,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**{**options, **config})).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 1.0)
        if not tie_output:
            model.lm_head.weight.normal_(0, 0.3)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def load_hf(marian: Path) -> tuple[Any, Any]:
    """transformers' own model (in eval mode) and tokenizer of a Marian directory."""
    import transformers

    model = transformers.MarianMTModel.from_pretrained(marian).eval()
    return model, transformers.MarianTokenizer.from_pretrained(marian)


def imported_run(marian: Path, run: Path) -> Path:
    """`nmt import hf MARIAN -o RUN`, as a user runs it; the run directory."""
    from nmt.cli import main

    assert main(["import", "hf", str(marian), "-o", str(run)]) == 0
    return run
