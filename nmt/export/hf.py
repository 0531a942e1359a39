"""Transformer run -> Hugging Face MarianMTModel + MarianTokenizer directory (`nmt export RUN
--format hf -o DIR`), which `MarianMTModel.from_pretrained(DIR).generate` runs (and, before
transformers 5, `transformers.pipeline("translation", model=DIR)`).

How our Transformer maps onto MarianMTModel (nmt.importers.marian_weights names the parameters):
- post-norm only. A pre-norm run is refused: MarianMTModel is post-norm, and the pre-norm classes
  (M2M100, NLLB) compute their sinusoids with other frequencies and an offset of two positions,
  from a table they do not load, so none computes our network. Learned positions are refused too
  (Marian's are sinusoidal), as are RNN runs and lowercasing runs (MarianTokenizer does not
  lowercase).
- positions: our interleaved sinusoids (`sinusoid_layout: interleaved`) are Marian's halves
  layout up to a permutation of the model dimension; the export permutes that dimension in every
  weight (embeddings, LayerNorms, every linear layer's input or output side), which maps one
  network onto the other exactly, and records `nmt_sinusoid_layout: interleaved` in config.json
  so that `nmt import hf` restores the original weights.
- tokens: vocab.json lists the sentencepiece pieces in our id order (<pad>=0, <unk>=1, <s>=2,
  </s>=3), source.spm/target.spm are the run's models; decoding starts from <s>
  (decoder_start_token_id 2), and <pad> and <s> are never generated (bad_words_ids). A separate
  source and target vocabulary gives MarianTokenizer's separate_vocabs (target_vocab.json).
- a multilingual run (`data.directions`, `data.tag: source`): each language tag `<2xx>` is named
  `>>xx<<` in vocab.json, MarianTokenizer's language token, which it splits off the front of a
  source text (">>xx<< text") and puts first, where the run was trained to see the tag; config.json
  records the directions (`nmt_directions`) so that `nmt import hf` gives them back. A run with
  `data.tag: target` is refused: MarianTokenizer has no place for a tag on the target side.
- our `final_logits_bias` is Marian's; without it the bias is zero.
- every MarianMTModel parameter and buffer is filled from the run, except the sinusoid tables
  Marian computes itself (DERIVED), and every run parameter lands somewhere; else the export
  fails naming the name, rather than writing random or dropping weights.
- dropout: `model.dropout` and `model.activation_dropout` (null: the dropout, which our
  feed-forward then applies after its activation) are Marian's `dropout` and `activation_dropout`.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path
from typing import Any

import torch

from nmt.checkpoint import load_model
from nmt.config import Config
from nmt.data.tokenizer import BOS, EOS, PAD, Tokenizer
from nmt.errors import NmtError
from nmt.files import atomic_dir
from nmt.importers.hf import LAYOUT_KEY, import_transformers
from nmt.importers.languages import DIRECTIONS_KEY, marian_code
from nmt.importers.marian_weights import halves_order, layer_names, permute_model_dim
from nmt.models.transformer import Transformer

ACTIVATIONS = {"relu": "relu", "swish": "swish", "gelu": "gelu"}
# MarianMTModel's sinusoid tables: computed from config.json when it loads, never saved.
DERIVED = frozenset(f"model.{side}.embed_positions.weight" for side in ("encoder", "decoder"))


def _refuse(cfg: Config, model: Any, tok: Tokenizer, path: str) -> None:
    m = cfg.model
    if not isinstance(model, Transformer):
        raise NmtError(
            f"cannot export '{m.arch}' ({path}) to Hugging Face: only 'transformer' runs "
            f"map onto MarianMTModel"
        )
    if m.norm == "pre":
        raise NmtError(
            f"cannot export {path} to Hugging Face: it is a pre-norm Transformer "
            f"('model.norm: pre'); MarianMTModel is post-norm, and the pre-norm classes "
            f"(M2M100, NLLB) use other sinusoid frequencies, so train with 'model.norm: post'"
        )
    if m.positions != "sinusoidal":
        raise NmtError(
            f"cannot export {path} to Hugging Face: MarianMTModel has sinusoidal positions, "
            f"this run 'model.positions: {m.positions}'"
        )
    if tok.lowercase:
        raise NmtError(
            f"cannot export {path} to Hugging Face: it lowercases its input "
            f"('data.lowercase: true') and MarianTokenizer does not"
        )
    if cfg.data.directions and cfg.data.tag == "target":
        raise NmtError(
            f"cannot export {path} to Hugging Face: its language tags are the decoder's first "
            f"token ('data.tag: target'), and MarianTokenizer puts a language token only on the "
            f"source; export it to CTranslate2 (target_prefix), or train with 'data.tag: source'"
        )


def _pieces(sp: Any, tok: Tokenizer) -> dict[str, int]:
    """vocab.json: piece -> id, each language tag under MarianTokenizer's name >>xx<<."""
    names = {i: marian_code(lang) for lang, i in tok.tags.items()}
    return {names.get(i, sp.id_to_piece(i)): i for i in range(sp.get_piece_size())}


def _languages(cfg: Config) -> tuple[Any, Any]:
    """MarianTokenizer's source_lang and target_lang: the run's, or for several directions
    their one source language (None where they have several) and no target language."""
    if not cfg.data.directions:
        return cfg.data.src_lang, cfg.data.tgt_lang
    sources = {s for s, _ in cfg.data.language_pairs()}
    return (sources.pop() if len(sources) == 1 else None), None


def _longest_output(cfg: Config) -> int:
    """Our longest output with its EOS (nmt.decode's limit for the longest input)."""
    d = cfg.decode
    return math.floor(d.max_len_a * (d.max_input_tokens + 1) + d.max_len_b) + 1


def _positions_needed(cfg: Config) -> int:
    """Rows of Marian's position table: our longest input and output."""
    return max(cfg.model.max_positions, cfg.decode.max_input_tokens + 1, _longest_output(cfg))


def marian_state(model: Transformer, layout: str) -> dict[str, torch.Tensor]:
    """Our weights under MarianMTModel's names, in Marian's sinusoid layout."""
    ours = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    if layout == "interleaved":
        ours = permute_model_dim(ours, halves_order(model.d_model))
    names = dict(layer_names(model.n_layers))
    left = sorted(
        set(ours) - set(names) - {"src_emb.weight", "tgt_emb.weight", "out.weight", "out.bias"}
    )
    if left:
        raise NmtError(
            f"cannot export to Hugging Face: the run's {', '.join(left)} has no MarianMTModel "
            f"counterpart; expected only the parameters nmt.importers.marian_weights names"
        )
    tgt = ours["tgt_emb.weight"]
    state = {
        "model.encoder.embed_tokens.weight": ours["src_emb.weight"],
        "model.decoder.embed_tokens.weight": tgt,
        "model.shared.weight": tgt,
        "lm_head.weight": ours["out.weight"],
        "final_logits_bias": ours.get("out.bias", torch.zeros(tgt.size(0)))[None],
    }
    for name, theirs in names.items():
        state[theirs] = ours[name]
    return state


def _fill(net: Any, ours: dict[str, torch.Tensor]) -> None:
    """Load our weights into `net`: every parameter and buffer from ours, or one that
    MarianMTModel derives itself (DERIVED); any other would be exported with random values."""
    state = net.state_dict()
    unfilled = sorted(set(state) - set(ours) - DERIVED)
    if unfilled:
        raise NmtError(
            f"cannot export to Hugging Face: MarianMTModel's {', '.join(unfilled)} would keep "
            f"random values; expected every parameter filled from the run's weights"
        )
    net.load_state_dict({**state, **{k: v for k, v in ours.items() if k in state}})


def build_marian(cfg: Config, model: Transformer, tok: Tokenizer) -> tuple[Any, dict]:
    """(MarianMTModel holding our weights, generation settings)."""
    tf = import_transformers()
    m = cfg.model
    positions = _positions_needed(cfg)
    extra = {LAYOUT_KEY: "interleaved"} if m.sinusoid_layout == "interleaved" else {}
    if cfg.data.directions:
        extra[DIRECTIONS_KEY] = list(cfg.data.directions)
    config = tf.MarianConfig(
        vocab_size=tok.src_vocab_size,
        decoder_vocab_size=tok.tgt_vocab_size,
        d_model=m.d_model,
        encoder_layers=m.layers,
        decoder_layers=m.layers,
        encoder_attention_heads=m.heads,
        decoder_attention_heads=m.heads,
        encoder_ffn_dim=m.ff,
        decoder_ffn_dim=m.ff,
        activation_function=ACTIVATIONS[m.activation],
        dropout=m.dropout,
        attention_dropout=m.attention_dropout,
        activation_dropout=m.dropout if m.activation_dropout is None else m.activation_dropout,
        max_position_embeddings=positions,
        scale_embedding=m.scale_embeddings,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=EOS,
        share_encoder_decoder_embeddings=m.tie_embeddings,
        tie_word_embeddings=m.tie_output,
        **extra,
    )
    net = tf.MarianMTModel(config).eval()
    _fill(net, marian_state(model, m.sinusoid_layout))
    gen = {
        "decoder_start_token_id": BOS,
        "eos_token_id": EOS,
        "forced_eos_token_id": EOS,
        "pad_token_id": PAD,
        "bad_words_ids": [[PAD], [BOS]],
        "num_beams": cfg.decode.beam,
        "max_length": _longest_output(cfg) + 1,  # + the decoder start token
    }
    return net, gen


def export_hf(target: str | Path, out_dir: str | Path, overwrite: bool = False) -> Path:
    """Write a MarianMTModel + MarianTokenizer directory for a post-norm Transformer run (or
    checkpoint). It appears complete or not at all."""
    out = Path(out_dir)
    if out.exists() and not overwrite and (not out.is_dir() or any(out.iterdir())):
        raise NmtError(f"output directory {out} already exists; pass --overwrite to replace it")
    tf = import_transformers()
    cfg, model, tok, meta = load_model(target)
    _refuse(cfg, model, tok, meta["path"])
    net, gen = build_marian(cfg, model, tok)
    with atomic_dir(out) as tmp:
        net.generation_config = tf.GenerationConfig(**gen)
        net.save_pretrained(tmp)
        vocab = tmp / "nmt_vocab"  # MarianTokenizer's inputs; it writes its own files
        vocab.mkdir()
        (vocab / "source.spm").write_bytes(tok.src_proto)
        (vocab / "target.spm").write_bytes(tok.tgt_proto or tok.src_proto)
        files = {"vocab": vocab / "vocab.json"}
        (vocab / "vocab.json").write_text(json.dumps(_pieces(tok.src, tok)), "utf-8")
        separate = _pieces(tok.src, tok) != _pieces(tok.tgt, tok)
        if separate:
            files["target_vocab_file"] = vocab / "target_vocab.json"
            files["target_vocab_file"].write_text(json.dumps(_pieces(tok.tgt, tok)), "utf-8")
        source_lang, target_lang = _languages(cfg)
        marian_tok = tf.MarianTokenizer(
            str(vocab / "source.spm"),
            str(vocab / "target.spm"),
            str(files["vocab"]),
            target_vocab_file=str(files.get("target_vocab_file", "")) or None,
            separate_vocabs=separate,
            source_lang=source_lang,
            target_lang=target_lang,
            model_max_length=cfg.decode.max_input_tokens + 1,
        )
        marian_tok.save_pretrained(tmp)
        shutil.rmtree(vocab)
        info = {"checkpoint": meta["path"], "step": meta["step"], "arch": cfg.model.arch}
        (tmp / "nmt_export.json").write_text(json.dumps(info, indent=2) + "\n", "utf-8")
    return out


def run(a: argparse.Namespace) -> int:
    """`nmt export RUN --format hf -o DIR`: the handler the CLI calls."""
    if a.quantization:
        raise NmtError("--quantization is for --format ctranslate2; --format hf writes fp32")
    out = export_hf(a.checkpoint, a.output, a.overwrite)
    print(f"Hugging Face MarianMTModel: {out}")
    return 0
