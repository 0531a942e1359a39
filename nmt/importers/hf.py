"""`nmt import hf MODEL -o RUN`: a Hugging Face MarianMTModel (OPUS-MT) as an ordinary run.

MODEL is a hub id (downloaded by `from_pretrained`) or a directory written by `save_pretrained`.
The run holds config.yaml (a post-norm `transformer` with Marian's options: `sinusoid_layout:
halves`, `activation: swish`, `final_logits_bias`, tied embeddings), the subword models and
best.pt, so every command that takes a run takes it.

Token ids. nmt fixes PAD=0, UNK=1, BOS=2, EOS=3 and starts decoding from BOS; Marian looks its
sentencepiece pieces up in vocab.json (</s>=0, <unk>=1, ..., <pad>=last) and starts decoding from
`decoder_start_token_id` (pad in every OPUS-MT model). The import reorders the vocabulary into our
slots: our id 0 is Marian's pad, 1 its unk, 3 its eos. Slot 2 is a new row holding the embedding of
Marian's decoder start token (whichever it is: pad, eos or an ordinary piece), with a final logit
bias of -1e9 (exp underflows to 0 in fp32); the start token itself keeps its own row and bias. So
the network computes exactly Marian's distribution over Marian's tokens, and decoding never emits
pad (Marian's `bad_words_ids`). Only a start token named <s> that Marian bans from generation (our
own export's) takes slot 2 itself, so that importing an export gives back its weights. The
remaining pieces follow in vocab.json order. The sentencepiece models are rewritten to emit these
ids themselves (nmt.importers.spm_order), and the source gets `</s>` appended, as MarianTokenizer
does. A multilingual model's `>>fra<<` tokens become language tags `<2fra>` of a run with
`data.tag: source` (nmt.importers.languages).

Dropout: Marian's `dropout` and `activation_dropout` (fc1's output) are our `model.dropout` and
`model.activation_dropout`, so fine-tuning an import drops out where Marian did.
"""

from __future__ import annotations

import logging
import shutil
import socket
import warnings
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlparse

import torch

from nmt.checkpoint import save_checkpoint, tokenizer_payload
from nmt.config.load import from_dict, to_dict
from nmt.data.tokenizer import Tokenizer, tag_piece
from nmt.errors import NmtError
from nmt.importers import SUPPORTED
from nmt.importers.languages import (
    data_section,
    language_codes,
    marian_code,
    rename_codes,
    source_language,
)
from nmt.importers.marian_weights import halves_order, layer_names, permute_model_dim
from nmt.importers.spm_order import SPECIALS, reorder
from nmt.models import build_model
from nmt.run_dir import RunDir

NEVER = -1e9  # final logit bias of a row that must never be predicted (exp(-1e9) == 0)
ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
LAYOUT_KEY = "nmt_sinusoid_layout"  # written by `nmt export --format hf` (nmt.export.hf)

log = logging.getLogger("nmt")


def import_transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise NmtError(
            "the transformers package is not installed: pip install 'nmt[hf]' "
            '(or pip install -e ".[hf]" in a checkout)'
        ) from None
    # Our commands print one line; transformers' loading/saving bars and advice would bury it.
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    import huggingface_hub.utils

    huggingface_hub.utils.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    return transformers


# ----------------------------------------------------------------------------------------------
# Reading the model


def _load(model: str) -> tuple[Any, Any, Any]:
    """(config, MarianMTModel in fp32 eval mode, MarianTokenizer) of a local dir or hub id."""
    tf = import_transformers()
    local = Path(model)
    if local.exists() and not local.is_dir():
        raise NmtError(f"{model} is a file; expected a model directory or a hub id")
    if local.is_dir() and not (local / "config.json").is_file():
        raise NmtError(
            f"{model} is not a Hugging Face model directory (no config.json); expected a "
            f"directory written by save_pretrained"
        )
    if not local.is_dir() and (model.startswith((".", "/", "~")) or model.count("/") > 1):
        raise NmtError(f"no such model directory: {model}")
    # Without network huggingface_hub retries for half a minute; a hub id then loads from the
    # local cache alone (or fails at once, naming the reason).
    offline = {} if local.is_dir() or _hub_reachable() else {"local_files_only": True}
    try:
        config = tf.AutoConfig.from_pretrained(model, **offline)
    except (OSError, ValueError) as e:
        if offline:
            raise NmtError(
                f"cannot fetch {model!r} from the Hugging Face hub: it is unreachable (no "
                f"network to {_hub_host()}, or HF_HUB_OFFLINE set) and the model is not in the "
                f"local cache; pass a directory written by save_pretrained"
            ) from None
        if local.is_dir():
            raise NmtError(
                f"{model}/config.json is not a usable model config: {_first(e)}"
            ) from None
        raise NmtError(
            f"cannot fetch {model!r} from the Hugging Face hub ({_first(e)}); check the id "
            f"and the network, or pass a directory written by save_pretrained"
        ) from None
    if config.model_type != "marian":
        raise NmtError(
            f"{model} is a {config.model_type!r} model ({', '.join(config.architectures or [])}); "
            f"nmt imports {SUPPORTED} only"
        )
    try:
        net = tf.MarianMTModel.from_pretrained(model, **offline).float().eval()
        tok = tf.MarianTokenizer.from_pretrained(model, **offline)
    except (OSError, ValueError, KeyError, AssertionError) as e:
        raise NmtError(
            f"cannot load the Marian model or tokenizer of {model}: {_first(e)}"
        ) from None
    return config, net, tok


def _hub_host() -> str:
    from huggingface_hub import constants

    return urlparse(constants.ENDPOINT).hostname or "huggingface.co"


def _hub_reachable() -> bool:
    """Whether the hub's host name resolves (False at once without network or when offline)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    try:
        socket.getaddrinfo(_hub_host(), 443)
    except OSError:
        return False
    return True


def _first(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def _order(vocab: dict[str, int], pad: int, unk: int, eos: int, bos: Optional[int], size: int):
    """(Marian row of each of our ids, None for a new row; the pieces in our order). `bos`: the
    Marian row our BOS slot takes itself, None for a new row."""
    piece = {i: p for p, i in vocab.items()}
    if sorted(piece) != list(range(size)) or len(piece) != len(vocab):
        raise NmtError(
            f"the vocabulary has {len(vocab)} pieces with ids that do not cover 0..{size - 1} "
            f"once each (the model's vocabulary size is {size})"
        )
    head = [pad, unk, bos, eos]
    rows = head + [i for i in range(size) if i not in head]
    # An ordinary entry named like one of our special slots (a vocab.json listing the
    # sentencepiece models' own <s>) keeps its row under a name no text produces.
    rest = [piece[i] if piece[i] not in SPECIALS else f"{piece[i]}#{i}" for i in rows[4:]]
    return rows, list(SPECIALS) + rest


def _decoder_start(
    net: Any, config: Any, vocab: dict[str, int], pad: int, size: int
) -> tuple[int, bool]:
    """(Marian's decoder start token, whether our BOS slot may be its row itself). It may only
    when Marian never generates it either and no text produces it: an <s> in bad_words_ids (our
    export's). Any other start token, pad, eos or a piece, keeps its own row: slot 2 is new."""
    gen = getattr(net, "generation_config", None)
    # generate() reads the generation config first (transformers 5 keeps the ids only there)
    start = getattr(gen, "decoder_start_token_id", None)
    start = config.decoder_start_token_id if start is None else start
    if start is None:
        return pad, False
    if not 0 <= start < size:
        raise NmtError(
            f"decoder_start_token_id {start} is not a target token id; expected one in "
            f"0..{size - 1}"
        )
    banned = getattr(gen, "bad_words_ids", None) or getattr(config, "bad_words_ids", None) or []
    named_s = vocab.get("<s>") == start
    return start, named_s and [start] in banned


def _take(table: torch.Tensor, rows: list[Optional[int]], fill: int) -> torch.Tensor:
    return table[[fill if r is None else r for r in rows]].clone()


# ----------------------------------------------------------------------------------------------
# Building the run


def _activation_dropout(config: Any) -> Optional[float]:
    act = getattr(config, "activation_dropout", config.dropout)
    return None if act == config.dropout else act


def _model_section(config: Any, bias: bool, tie_embeddings: bool, tie_output: bool) -> dict:
    if config.encoder_layers != config.decoder_layers:
        raise NmtError(
            f"the model has {config.encoder_layers} encoder and {config.decoder_layers} "
            f"decoder layers; nmt's transformer has one 'model.layers' for both"
        )
    for what in ("attention_heads", "ffn_dim"):
        enc, dec = getattr(config, f"encoder_{what}"), getattr(config, f"decoder_{what}")
        if enc != dec:
            raise NmtError(f"encoder_{what} {enc} differs from decoder_{what} {dec}; nmt needs one")
    act = ACTIVATIONS.get(config.activation_function)
    if act is None:
        raise NmtError(
            f"activation_function {config.activation_function!r} is not supported; expected "
            f"one of {', '.join(ACTIVATIONS)}"
        )
    return {
        "arch": "transformer",
        "layers": config.encoder_layers,
        "d_model": config.d_model,
        "heads": config.encoder_attention_heads,
        "ff": config.encoder_ffn_dim,
        "dropout": config.dropout,
        # null where it equals the dropout, as a run of ours that never set it stores it
        "activation_dropout": _activation_dropout(config),
        "attention_dropout": config.attention_dropout,
        "norm": "post",
        "positions": "sinusoidal",
        "max_positions": config.max_position_embeddings,
        "sinusoid_layout": getattr(config, LAYOUT_KEY, "halves"),
        "scale_embeddings": bool(config.scale_embedding),
        "activation": act,
        "final_logits_bias": bias,
        "tie_embeddings": tie_embeddings,
        "tie_output": tie_output,
    }


def _weights(hf: dict, layers: int, src_rows: list, tgt_rows: list, fill: tuple) -> tuple:
    """(our state dict, whether it has a final logits bias, tie_embeddings, tie_output). `fill`:
    the Marian rows (source, target) that the new rows copy."""
    enc_emb, dec_emb = (
        hf["model.encoder.embed_tokens.weight"],
        hf["model.decoder.embed_tokens.weight"],
    )
    head = hf.get("lm_head.weight", dec_emb)
    logits_bias = hf.get("final_logits_bias", torch.zeros(1, dec_emb.size(0)))[0]
    new_rows = [i for i, r in enumerate(tgt_rows) if r is None]
    bias = _take(logits_bias, tgt_rows, fill[1])
    bias[new_rows] = NEVER
    tie_output = torch.equal(head, dec_emb)
    use_bias = bool(new_rows) or bool(logits_bias.any())
    state = {
        "src_emb.weight": _take(enc_emb, src_rows, fill[0]),
        "tgt_emb.weight": _take(dec_emb, tgt_rows, fill[1]),
        "out.weight": _take(head, tgt_rows, fill[1]),
    }
    tie_embeddings = src_rows == tgt_rows and torch.equal(
        state["src_emb.weight"], state["tgt_emb.weight"]
    )
    if use_bias:
        state["out.bias"] = bias
    for ours, theirs in layer_names(layers):
        state[ours] = hf[theirs].clone()
    return state, use_bias, tie_embeddings, tie_output


def _rows(net: Any, config: Any, tok: Any, hf: dict) -> tuple:
    """(source rows, source pieces, target rows, target pieces, the Marian rows (source,
    target) that new rows copy): each side's vocabulary in our id order, language tokens
    renamed to our tags."""
    pad, eos = config.pad_token_id, config.eos_token_id
    src_vocab = tok.encoder
    tgt_vocab = tok.target_encoder if tok.separate_vocabs else tok.encoder
    codes = language_codes(src_vocab)
    if codes and tok.separate_vocabs:
        named = ", ".join(marian_code(c) for c in codes[:3]) + (", ..." if codes[3:] else "")
        raise NmtError(
            f"the model has language tokens ({named}) and separate source and target "
            f"vocabularies; nmt's language tags are pieces of one joint vocabulary, so it "
            f"imports multilingual Marian models with one vocab.json"
        )
    src_size = hf["model.encoder.embed_tokens.weight"].size(0)
    tgt_size = hf["model.decoder.embed_tokens.weight"].size(0)
    start, start_is_bos = _decoder_start(net, config, tgt_vocab, pad, tgt_size)
    # Source ids: the source vocabulary's own pad/unk/eos (the same ids when the vocab is joint).
    src_pad = src_vocab.get(str(tok.pad_token), pad)
    src_rows, src_pieces = _order(
        src_vocab,
        src_pad,
        src_vocab[str(tok.unk_token)],
        src_vocab.get(str(tok.eos_token), eos),
        src_vocab.get("<s>"),  # our export's source vocab has one (unused): keep its row
        src_size,
    )
    bos = start if start_is_bos else None
    unk = tgt_vocab[str(tok.unk_token)]
    tgt_rows, tgt_pieces = _order(tgt_vocab, pad, unk, eos, bos, tgt_size)
    src_pieces, tgt_pieces = rename_codes(src_pieces, codes), rename_codes(tgt_pieces, codes)
    if tgt_rows[2] is None and src_pieces == tgt_pieces:
        # a joint vocabulary: one row order and one table on both sides
        return tgt_rows, src_pieces, tgt_rows, tgt_pieces, (start, start)
    return src_rows, src_pieces, tgt_rows, tgt_pieces, (src_pad, start)


def _data(model: str, config: Any, tok: Any) -> dict:
    """The imported config's `data` section: a placeholder (fine-tuning sets its own corpus, see
    docs/pretrained.md), with a direction per language token of a multilingual model."""
    data = {
        "source": "local",
        "path": "data",
        "src_lang": tok.source_lang or "src",
        "tgt_lang": tok.target_lang or "tgt",
    }
    codes = language_codes(tok.encoder)
    if codes:
        data.update(data_section(config, codes, source_language(tok.source_lang, model)))
    return data


def convert(model: str) -> tuple[dict, dict[str, torch.Tensor], Tokenizer]:
    """(config dict, our state dict, tokenizer) of a Marian model."""
    config, net, tok = _load(model)
    hf = net.state_dict()
    if config.pad_token_id is None or config.eos_token_id is None:
        raise NmtError(f"{model}: config.json must set pad_token_id and eos_token_id")
    src_rows, src_pieces, tgt_rows, tgt_pieces, fill = _rows(net, config, tok, hf)
    state, use_bias, tie_embeddings, tie_output = _weights(
        hf, config.encoder_layers, src_rows, tgt_rows, fill
    )
    section = _model_section(config, use_bias, tie_embeddings, tie_output)
    if section["sinusoid_layout"] == "interleaved":  # our own export: undo its permutation
        order = halves_order(config.d_model)
        state = permute_model_dim(state, sorted(range(len(order)), key=order.__getitem__))

    joint = src_pieces == tgt_pieces
    gen = getattr(net, "generation_config", None)
    tags = {tag_piece(c) for c in language_codes(tok.encoder)}
    spm = [Path(p).read_bytes() for p in tok.spm_files]
    src_proto, tgt_proto = reorder(spm[0], src_pieces, tags), reorder(spm[1], tgt_pieces, tags)
    one_model = joint and src_proto == tgt_proto
    tokenizer = Tokenizer(src_proto, None if one_model else tgt_proto, lowercase=False)
    raw = {
        "data": _data(model, config, tok),
        "vocab": {"joint": joint, "size": len(tgt_pieces)},
        "model": section,
        "decode": {"beam": int(getattr(gen, "num_beams", None) or 5)},
    }
    return raw, state, tokenizer


def import_hf(model: str, out_dir: str | Path, overwrite: bool = False) -> Path:
    """Write run directory `out_dir` for Marian model `model` (hub id or local directory)."""
    out = Path(out_dir)
    run = RunDir(out)
    if not run.is_empty() and not overwrite:
        raise NmtError(f"output directory {out} already exists; pass --overwrite to replace it")
    raw, state, tok = convert(model)
    raw["data"]["path"] = str(out.resolve() / "data")
    raw["train"] = {"run_dir": str(out)}
    cfg = from_dict(raw, f"the config built from {model}")
    net = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    net.load_state_dict(state)
    if overwrite and out.exists():
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    run.create(cfg)
    tok.save(run.path)
    save_checkpoint(
        run.best,
        {
            "config": to_dict(cfg),
            "model": net.state_dict(),
            "tokenizer": tokenizer_payload(tok),
            "step": 0,
            "imported_from": model,
            "params": net.num_parameters(),
        },
    )
    return out
