"""Transformer checkpoint -> CTranslate2 model directory, through CTranslate2's own spec API.

How our Transformer maps onto `ctranslate2.specs.TransformerSpec`:
- layer norms: `pre_norm` follows `model.norm`; the final encoder/decoder LayerNorms exist only
  with pre-norm (CTranslate2's post-norm spec has none either); epsilon is torch's (1e-5, not
  CTranslate2's default 1e-6).
- positions: our sinusoids interleave sin/cos (PE[pos, 2i] = sin, PE[pos, 2i+1] = cos) where
  CTranslate2's built-in table concatenates them, so the table is always written out explicitly
  (learned positions: the learned table). Row 0 is the first token, BOS on the decoder side.
- embeddings are scaled by sqrt(d_model) in both engines (`scale_embeddings`).
- self-attention Q, K, V are fused into one linear, cross-attention K, V into another.
- tied embeddings/output: the same array is given to each place; CTranslate2 stores it once.
- tokens: the vocabularies are the sentencepiece pieces in id order (PAD=0, UNK=1, BOS=2, EOS=3);
  the decoder starts from BOS and the source gets its EOS appended (`add_source_eos`), so a caller
  feeds bare sentencepiece pieces.

A multilingual run (`data.directions`) has its language tags `<2xx>` in both vocabularies (they
are pieces of its sentencepiece model). With `data.tag: source` a caller puts the tag first in the
source pieces; with `data.tag: target` it passes `target_prefix=[["<2xx>"]]`, which CTranslate2
forces, returns and counts in `max_decoding_length` as nmt counts its forced prefix.

CTranslate2 limits a hypothesis by one `max_decoding_length` per call, where we allow
floor(a * src_len + b) tokens per sentence (src_len counting the EOS); `translate_ct2` groups
sentences by that limit so both engines stop at the same length.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from torch import Tensor, nn

from nmt.checkpoint import load_model
from nmt.config import Config, DecodeConfig
from nmt.config.load import to_dict
from nmt.data.tokenizer import BOS, EOS, PAD, UNK, Tokenizer
from nmt.errors import NmtError
from nmt.files import atomic_dir
from nmt.models.transformer import Transformer, sinusoids

if TYPE_CHECKING:
    import ctranslate2

QUANTIZATIONS = ("int8", "int8_float32", "float16")


def import_ctranslate2() -> Any:
    try:
        import ctranslate2
    except ImportError:
        raise NmtError(
            "the ctranslate2 package is not installed: pip install ctranslate2 "
            "(or the project's 'export' extra)"
        ) from None
    return ctranslate2


def _array(t: Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().copy()


def _linear(spec: Any, *layers: nn.Linear) -> None:
    """Set a LinearSpec from one layer, or from several fused along the output dimension."""
    spec.weight = np.concatenate([_array(l.weight) for l in layers])
    if layers[0].bias is not None:
        spec.bias = np.concatenate([_array(l.bias) for l in layers])


def _norm(spec: Any, norm: nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _ffn(spec: Any, ff: nn.Sequential, norm: nn.LayerNorm) -> None:
    _norm(spec.layer_norm, norm)
    _linear(spec.linear_0, ff[0])
    _linear(spec.linear_1, ff[3])


def _position_table(model: Transformer, cfg: Config) -> np.ndarray:
    pos = model.positions
    if pos.kind == "learned":
        return _array(pos.table.weight)
    # Long enough for the longest input and the longest output our limits allow.
    d = cfg.decode
    longest = max(
        pos.max_positions,
        d.max_input_tokens + 1,
        math.floor(d.max_len_a * (d.max_input_tokens + 1) + d.max_len_b) + 1,
    )
    return _array(sinusoids(longest, model.d_model, pos.layout))


def build_spec(cfg: Config, model: Transformer, tok: Tokenizer) -> Any:
    """A filled-in `ctranslate2.specs.TransformerSpec` holding the model's weights."""
    specs = import_ctranslate2().specs
    pre = cfg.model.norm == "pre"
    act = {"relu": "RELU", "swish": "SWISH", "gelu": "GELU"}[cfg.model.activation]
    spec = specs.TransformerSpec.from_config(
        cfg.model.layers, cfg.model.heads, pre_norm=pre, activation=getattr(specs.Activation, act)
    )
    table = _position_table(model, cfg)
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = _array(model.src_emb.weight)
    dec.embeddings.weight = _array(model.tgt_emb.weight)
    enc.position_encodings.encodings = table
    dec.position_encodings.encodings = table
    enc.scale_embeddings = dec.scale_embeddings = cfg.model.scale_embeddings
    if pre:
        _norm(enc.layer_norm, model.enc_norm)
        _norm(dec.layer_norm, model.dec_norm)
    for s, layer in zip(enc.layer, model.encoder):
        a = layer.self_attn
        _linear(s.self_attention.linear[0], a.q, a.k, a.v)
        _linear(s.self_attention.linear[1], a.o)
        _norm(s.self_attention.layer_norm, layer.norm1)
        _ffn(s.ffn, layer.ff, layer.norm2)
    for s, layer in zip(dec.layer, model.decoder):
        a, c = layer.self_attn, layer.cross_attn
        _linear(s.self_attention.linear[0], a.q, a.k, a.v)
        _linear(s.self_attention.linear[1], a.o)
        _norm(s.self_attention.layer_norm, layer.norm1)
        _linear(s.attention.linear[0], c.q)
        _linear(s.attention.linear[1], c.k, c.v)
        _linear(s.attention.linear[2], c.o)
        _norm(s.attention.layer_norm, layer.norm2)
        _ffn(s.ffn, layer.ff, layer.norm3)
    _linear(dec.projection, model.out)

    src = [tok.src.id_to_piece(i) for i in range(tok.src_vocab_size)]
    tgt = [tok.tgt.id_to_piece(i) for i in range(tok.tgt_vocab_size)]
    spec.register_source_vocabulary(src)
    spec.register_target_vocabulary(tgt)
    c = spec.config
    c.unk_token, c.bos_token, c.eos_token = tgt[UNK], tgt[BOS], tgt[EOS]
    c.decoder_start_token = tgt[BOS]
    c.add_source_eos = True
    c.layer_norm_epsilon = float(model.encoder[0].norm1.eps)
    return spec


def _converter(spec: Any) -> Any:
    """CTranslate2's own Converter (validation, quantization, saving) around a built spec."""
    base = import_ctranslate2().converters.Converter

    class NmtConverter(base):  # type: ignore[misc, valid-type]
        def _load(self) -> Any:
            return spec

    return NmtConverter()


def export_ctranslate2(
    target: str | Path,
    out_dir: str | Path,
    quantization: Optional[str] = None,
    overwrite: bool = False,
) -> Path:
    """Write a CTranslate2 model directory for a Transformer run or checkpoint.

    The directory holds model.bin, config.json, the vocabulary JSON file(s), the sentencepiece
    model(s) of the run (spm.model, or spm.src.model and spm.tgt.model) and nmt_export.json (the
    decode settings and what the caller must do to match `nmt translate`). It appears complete
    or not at all.
    """
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise NmtError(
            f"--quantization {quantization!r}: expected one of {', '.join(QUANTIZATIONS)}"
        )
    out = Path(out_dir)
    if out.exists() and not overwrite and (not out.is_dir() or any(out.iterdir())):
        raise NmtError(f"output directory {out} already exists; pass --overwrite to replace it")
    import_ctranslate2()
    cfg, model, tok, meta = load_model(target)
    if not isinstance(model, Transformer):
        raise NmtError(
            f"cannot export '{cfg.model.arch}' ({meta['path']}) to CTranslate2: it "
            f"has no RNN decoder; only 'transformer' models can be exported"
        )
    spec = build_spec(cfg, model, tok)
    with atomic_dir(out) as tmp:
        _converter(spec).convert(str(tmp), quantization=quantization, force=True)
        tok.save(tmp)
        info = {
            "checkpoint": meta["path"],
            "step": meta["step"],
            "arch": cfg.model.arch,
            "quantization": quantization or "float32",
            "lowercase": tok.lowercase,
            "decode": to_dict(cfg)["decode"],
            "note": "feed sentencepiece pieces without </s> (add_source_eos is set); pass "
            "max_decoding_length = floor(max_len_a * (pieces + 1) + max_len_b) per "
            "sentence and min_decoding_length=0 to stop where nmt stops",
            **_multilingual_info(cfg, tok),
        }
        (tmp / "nmt_export.json").write_text(json.dumps(info, indent=2) + "\n", "utf-8")
    return out


def _multilingual_info(cfg: Config, tok: Tokenizer) -> dict:
    """nmt_export.json's record of a multilingual run: its directions, tags and where a tag
    goes (empty for a one-direction run)."""
    if not tok.tags:
        return {}
    where = (
        "first source piece (pieces counted with it)"
        if cfg.data.tag == "source"
        else "target_prefix=[['<2xx>']] (counted in max_decoding_length)"
    )
    return {
        "directions": list(cfg.data.directions),
        "tag": cfg.data.tag,
        "language_tags": {lang: tok.tgt.id_to_piece(i) for lang, i in sorted(tok.tags.items())},
        "tag_note": f"the target language's tag <2xx> goes as the {where}",
    }


# ----------------------------------------------------------------------------------------------
# Decoding with an exported model the way `nmt translate` decodes


def output_limit(n_src_ids: int, cfg: DecodeConfig) -> int:
    """Our per-sentence limit (nmt.search.hypotheses.max_lengths) for a source of n ids incl. EOS."""
    return math.floor(cfg.max_len_a * n_src_ids + cfg.max_len_b)


def translate_ct2(
    translator: "ctranslate2.Translator",
    tok: Tokenizer,
    texts: list[str],
    cfg: DecodeConfig,
    beam: int = 1,
    batch_tokens: Optional[int] = None,
) -> list[str]:
    """Translate like `nmt translate`: same subwords, same truncation, same per-sentence length
    limit (sentences grouped by limit), PAD/BOS never generated, empty output allowed. A
    direction's view of a multilingual tokenizer (`Tokenizer.for_direction`) puts its tag on
    the source, or forces it as the target prefix, as the run was trained."""
    from nmt.text_translation import encode_inputs  # the one place inputs are truncated

    ids = encode_inputs(tok, texts, cfg.max_input_tokens)
    forced = tok.target_prefix(*tok.direction) if tok.direction else []
    prefix = [tok.tgt.id_to_piece(i) for i in forced]
    live = [i for i, t in enumerate(texts) if t.strip()]
    groups: dict[int, list[int]] = {}
    for i in live:
        groups.setdefault(output_limit(len(ids[i]), cfg), []).append(i)
    banned = [[tok.tgt.id_to_piece(PAD)], [tok.tgt.id_to_piece(BOS)]]
    out = [""] * len(texts)
    for limit, members in sorted(groups.items()):
        pieces = [[tok.src.id_to_piece(t) for t in ids[i][:-1]] for i in members]
        results = translator.translate_batch(
            pieces,
            beam_size=beam,
            length_penalty=cfg.alpha,
            max_decoding_length=limit,
            min_decoding_length=0,
            suppress_sequences=banned,
            target_prefix=[prefix] * len(members) if prefix else None,
            max_batch_size=batch_tokens or cfg.batch_tokens,
            batch_type="tokens",
        )
        for i, r in zip(members, results):
            out[i] = tok.decode_tgt([[tok.tgt.piece_to_id(p) for p in r.hypotheses[0]]])[0]
    return out
