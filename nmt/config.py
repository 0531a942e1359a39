"""Typed configuration: one dataclass per section, loaded from YAML with dotted `--set` overrides.

Every default lives here, next to its documentation (`docs/config.md` is generated from these
fields by `python -m nmt.config --docs`). Unknown keys, wrong types and out-of-range values fail
before any work starts with one line naming the key, the file and what was expected.
"""
from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml

from nmt.errors import NmtError

REQUIRED = dataclasses.MISSING


def opt(default: Any, doc: str, lo: float | None = None, hi: float | None = None,
        lo_open: bool = False, hi_open: bool = False) -> Any:
    """A documented config field. `lo`/`hi` bound numbers (open bounds exclude the value)."""
    meta = {"doc": doc, "lo": lo, "hi": hi, "lo_open": lo_open, "hi_open": hi_open}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    if dataclasses.is_dataclass(default):
        return field(default_factory=type(default), metadata=meta)
    if default is REQUIRED:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class SyntheticConfig:
    train: int = opt(20000, "number of generated training pairs", lo=1)
    valid: int = opt(500, "number of generated validation pairs", lo=1)
    test: int = opt(1000, "number of generated test pairs", lo=1)
    seed: int = opt(1, "generator seed (the corpus is a pure function of its settings)")
    lexicon: int = opt(400, "number of content words in the lexicon", lo=20)
    min_words: int = opt(3, "shortest source sentence in words", lo=1)
    max_words: int = opt(80, "longest source sentence in words", lo=3)
    long_fraction: float = opt(0.3, "share of sentences drawn from the long (nested-clause) regime",
                               lo=0.0, hi=1.0)


@dataclass
class DataConfig:
    source: Literal["synthetic", "hub", "local"] = opt(
        REQUIRED, "where the corpus comes from: built-in synthetic generator, a HuggingFace hub "
        "dataset, or local files")
    src_lang: str = opt("src", "source language key (file suffix, JSONL/hub translation key, TSV column)")
    tgt_lang: str = opt("tgt", "target language key")
    hub_name: Optional[str] = opt(None, "hub dataset id, e.g. bentrevett/multi30k (source: hub)")
    hub_config: Optional[str] = opt(None, "hub dataset config name, e.g. fr-en for wmt14")
    path: Optional[str] = opt(None, "directory holding the local files (source: local); relative "
                                    "paths resolve against the working directory")
    format: Literal["text", "tsv", "jsonl"] = opt(
        "text", "local format: text = SPLIT.SRC + SPLIT.TGT line-aligned files; tsv = SPLIT.tsv "
        "with columns named by the language keys (or src<TAB>tgt without header); jsonl = "
        "SPLIT.jsonl with {\"translation\": {SRC: ..., TGT: ...}}")
    splits: dict[str, str] = opt({"train": "train", "valid": "valid", "test": "test"},
                                 "split role -> split name on disk / on the hub (roles: train, "
                                 "valid, test, any others you want to evaluate)")
    synthetic: SyntheticConfig = opt(SyntheticConfig(), "built-in corpus settings (source: synthetic)")
    max_len: int = opt(100, "training pairs with more subword tokens than this on either side are "
                            "dropped (train split only)", lo=1)
    max_ratio: float = opt(3.0, "training pairs whose token-length ratio exceeds this are dropped",
                           lo=1.0)
    batch_tokens: int = opt(3000, "token budget per batch (max of source and target tokens, "
                                  "padding included)", lo=1)
    batch_size: int = opt(0, "if > 0, batches hold this many sentences instead of a token budget",
                          lo=0)
    lowercase: bool = opt(False, "lowercase both sides before subword training and encoding")


@dataclass
class VocabConfig:
    type: Literal["unigram", "bpe", "word"] = opt("unigram", "sentencepiece model type")
    size: int = opt(8000, "vocabulary size (per side when joint is false)", lo=8)
    joint: bool = opt(True, "one vocabulary for source and target")
    character_coverage: float = opt(1.0, "sentencepiece character_coverage", lo=0.5, hi=1.0)
    model: Optional[str] = opt(None, "existing sentencepiece model to use instead of training one "
                                     "(joint only)")
    src_model: Optional[str] = opt(None, "existing source sentencepiece model (joint: false)")
    tgt_model: Optional[str] = opt(None, "existing target sentencepiece model (joint: false)")
    max_sentences: int = opt(1000000, "at most this many training sentences feed subword training",
                             lo=1)


@dataclass
class ModelConfig:
    arch: str = opt(REQUIRED, "registered architecture: seq2seq | rnnsearch | transformer")
    # RNN models
    rnn_type: Literal["gru", "lstm"] = opt("gru", "recurrent cell (seq2seq, rnnsearch)")
    emb_size: int = opt(256, "embedding size (RNN models)", lo=1)
    hidden_size: int = opt(512, "decoder hidden size (RNN models); seq2seq encoder size too", lo=1)
    enc_hidden_size: int = opt(0, "rnnsearch encoder size per direction; 0 = hidden_size // 2",
                               lo=0)
    layers: int = opt(1, "layers in encoder and decoder (all architectures)", lo=1)
    dropout: float = opt(0.1, "dropout probability", lo=0.0, hi=1.0, hi_open=True)
    reverse_source: bool = opt(False, "seq2seq: feed the source reversed (Sutskever et al. 2014)")
    feed_context: bool = opt(True, "seq2seq: concatenate the context vector c = h_T to the decoder "
                                   "input and output at every step (Cho et al. 2014)")
    attention: Literal["bahdanau", "luong_dot", "luong_general"] = opt(
        "bahdanau", "rnnsearch alignment model: additive (Bahdanau) or Luong dot/general")
    attention_size: int = opt(0, "additive attention size; 0 = hidden_size", lo=0)
    deep_output: Literal["maxout", "tanh", "none"] = opt(
        "maxout", "RNN deep output layer before the softmax")
    # Transformer
    d_model: int = opt(256, "transformer model width", lo=1)
    heads: int = opt(4, "attention heads", lo=1)
    ff: int = opt(1024, "transformer feed-forward size", lo=1)
    attention_dropout: float = opt(0.0, "transformer: dropout on attention weights (0 keeps the "
                                        "fused attention kernel on CPU)", lo=0.0, hi=1.0,
                                   hi_open=True)
    norm: Literal["pre", "post"] = opt("pre", "transformer layer-norm placement")
    positions: Literal["sinusoidal", "learned"] = opt("sinusoidal", "transformer position encoding")
    max_positions: int = opt(1024, "longest sequence learned positions support", lo=1)
    tie_embeddings: bool = opt(False, "share source and target embeddings (needs vocab.joint)")
    tie_output: bool = opt(True, "tie the target embedding to the output projection")


@dataclass
class TrainConfig:
    run_dir: str = opt("runs/default", "run directory: config, subword models, checkpoints, logs")
    seed: int = opt(1, "seeds Python, NumPy and torch; also the batch shuffling")
    max_steps: int = opt(0, "stop after this many optimiser steps (0 = no limit)", lo=0)
    max_epochs: int = opt(0, "stop after this many epochs (0 = no limit)", lo=0)
    max_minutes: float = opt(0.0, "wall-clock budget in minutes; stops cleanly with a checkpoint "
                                  "(0 = no limit)", lo=0.0)
    precision: Literal["fp32", "bf16", "fp16"] = opt(
        "fp32", "autocast precision: bf16 on CPU or CUDA, fp16 on CUDA only (with a GradScaler)")
    device: Literal["auto", "cpu", "cuda"] = opt("auto", "auto = cuda when available")
    threads: int = opt(0, "torch intra-op threads on CPU (0 = torch's default)", lo=0)
    optimizer: Literal["adam", "adamw"] = opt("adam", "optimiser")
    lr: float = opt(0.0005, "peak learning rate", lo=0.0, lo_open=True)
    betas: list[float] = opt([0.9, 0.98], "Adam betas")
    weight_decay: float = opt(0.0, "weight decay", lo=0.0)
    clip_grad: float = opt(1.0, "clip the gradient norm to this (0 = off)", lo=0.0)
    label_smoothing: float = opt(0.1, "label smoothing of the cross-entropy loss",
                                 lo=0.0, hi=1.0, hi_open=True)
    accum_steps: int = opt(1, "batches accumulated per optimiser step", lo=1)
    schedule: Literal["constant", "noam", "inverse_sqrt", "plateau"] = opt(
        "constant", "learning-rate schedule; warmup applies to all but plateau. inverse_sqrt: "
        "linear warm-up to lr, then lr * sqrt(warmup_steps / step) (Vaswani et al. 2017 with lr "
        "as its peak); noam is another name for the same schedule")
    warmup_steps: int = opt(0, "linear warm-up steps", lo=0)
    plateau_factor: float = opt(0.5, "plateau: multiply lr by this when validation stalls",
                                lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    plateau_patience: int = opt(2, "plateau: validations without improvement before decaying",
                                lo=0)
    min_lr: float = opt(1e-6, "plateau: learning-rate floor", lo=0.0)
    log_every: int = opt(50, "steps between log lines", lo=1)
    valid_every: int = opt(500, "steps between validations (also at the end)", lo=1)
    valid_max_sentences: int = opt(0, "decode at most this many validation sentences for BLEU "
                                      "(0 = all)", lo=0)
    early_stop_metric: Literal["bleu", "chrf", "loss"] = opt("bleu", "metric for best checkpoint, "
                                                                     "early stopping and plateau")
    patience: int = opt(0, "stop after this many validations without improvement (0 = never)",
                        lo=0)
    keep_last: int = opt(3, "keep this many recent step checkpoints", lo=1)
    max_bad_steps: int = opt(5, "stop after this many consecutive non-finite losses", lo=1)
    compile: bool = opt(False, "wrap the model in torch.compile")
    progress: bool = opt(True, "show a tqdm progress bar (on a terminal only, never in a pipe or "
                         "file)")


@dataclass
class DecodeConfig:
    beam: int = opt(5, "beam size (1 = greedy)", lo=1)
    alpha: float = opt(0.6, "GNMT length penalty exponent ((5+len)/6)^alpha; 0 = off", lo=0.0)
    max_len_a: float = opt(1.5, "hypotheses stop at a * source_length + b tokens", lo=0.0)
    max_len_b: int = opt(10, "see max_len_a", lo=1)
    nbest: int = opt(1, "hypotheses returned per sentence (<= beam)", lo=1)
    batch_tokens: int = opt(4000, "source-token budget per decoding batch", lo=1)
    max_input_tokens: int = opt(250, "longer inputs are truncated to this many subword tokens "
                                     "(with a warning)", lo=1)


@dataclass
class EvalConfig:
    buckets: list[int] = opt([10, 20, 30, 40, 50], "upper bounds (source words, inclusive) of the "
                                                    "length buckets; a final open bucket follows")
    split: str = opt("test", "default split role for nmt evaluate")


@dataclass
class Config:
    data: DataConfig = opt(REQUIRED, "corpus, filtering and batching")
    model: ModelConfig = opt(REQUIRED, "architecture and sizes")
    vocab: VocabConfig = opt(VocabConfig(), "sentencepiece subwords")
    train: TrainConfig = opt(TrainConfig(), "optimisation, precision, limits, checkpoints")
    decode: DecodeConfig = opt(DecodeConfig(), "greedy/beam search settings")
    eval: EvalConfig = opt(EvalConfig(), "evaluation settings")


# ----------------------------------------------------------------------------------------------
# Loading and validation

def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) if not isinstance(a, str) else a for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return f"{_type_name(args[0])} or null"
    if origin is list:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        k, v = typing.get_args(tp)
        return f"mapping of {_type_name(k)} to {_type_name(v)}"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str, where: str) -> Any:
    """Check `value` against the annotation `tp`; return it (ints widen to floats)."""
    origin = typing.get_origin(tp)

    def bad() -> NmtError:
        return NmtError(f"wrong type for '{key}' in {where}: expected {_type_name(tp)}, "
                        f"got {value!r}")

    if origin in (Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return _coerce(value, inner, key, where)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise bad()
        return value
    if origin is list:
        if not isinstance(value, list):
            raise bad()
        (inner,) = typing.get_args(tp)
        return [_coerce(v, inner, f"{key}[{i}]", where) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise bad()
        kt, vt = typing.get_args(tp)
        return {_coerce(k, kt, key, where): _coerce(v, vt, f"{key}.{k}", where)
                for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise bad()
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                raise bad() from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise bad()
        return value
    raise bad()  # pragma: no cover - every annotation above is handled


def _check_range(f: dataclasses.Field, value: Any, key: str, where: str) -> None:
    lo, hi = f.metadata.get("lo"), f.metadata.get("hi")
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    too_low = lo is not None and (value <= lo if f.metadata["lo_open"] else value < lo)
    too_high = hi is not None and (value >= hi if f.metadata["hi_open"] else value > hi)
    if too_low or too_high:
        lo_s = "" if lo is None else ("> " if f.metadata["lo_open"] else ">= ") + str(lo)
        hi_s = "" if hi is None else ("< " if f.metadata["hi_open"] else "<= ") + str(hi)
        expected = " and ".join(s for s in (lo_s, hi_s) if s)
        raise NmtError(f"value out of range for '{key}' in {where}: expected {expected}, "
                       f"got {value!r}")


def _all_keys(cls: type, prefix: str = "") -> list[str]:
    keys = []
    for f in dataclasses.fields(cls):
        tp = _hints(cls)[f.name]
        keys.append(prefix + f.name)
        if dataclasses.is_dataclass(tp):
            keys.extend(_all_keys(tp, prefix + f.name + "."))
    return keys


def _unknown(key: str, where: str) -> NmtError:
    close = difflib.get_close_matches(key, _all_keys(Config), n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return NmtError(f"unknown key '{key}' in {where}{hint}")


def _build(cls: type, raw: Any, prefix: str, where: str) -> Any:
    if not isinstance(raw, dict):
        name = prefix.rstrip(".") or "the top level"
        raise NmtError(f"wrong type for '{name}' in {where}: expected a mapping, got {raw!r}")
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for k in raw:
        if k not in fields:
            raise _unknown(prefix + str(k), where)
    kwargs = {}
    for name, f in fields.items():
        key = prefix + name
        tp = hints[name]
        if name not in raw:
            if f.default is REQUIRED and f.default_factory is REQUIRED:  # type: ignore[misc]
                raise NmtError(f"missing required key '{key}' in {where}")
            continue
        if dataclasses.is_dataclass(tp):
            kwargs[name] = _build(tp, raw[name] if raw[name] is not None else {}, key + ".", where)
        else:
            kwargs[name] = _coerce(raw[name], tp, key, where)
            _check_range(f, kwargs[name], key, where)
    return cls(**kwargs)


def read_yaml(path: Path, kind: str = "config") -> dict:
    """A YAML mapping from a file; every failure is one line naming the file (and line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NmtError(f"{kind} file not found: {path}") from None
    except UnicodeDecodeError as e:
        raise NmtError(f"{kind} file {path} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise NmtError(f"cannot read {kind} file {path}: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if isinstance(e, yaml.constructor.ConstructorError):  # e.g. !!python/object: never run
            raise NmtError(f"YAML tag not allowed in {path}{at}: {problem} ({kind} files are "
                           f"plain YAML; nothing was run)") from None
        raise NmtError(f"YAML syntax error in {path}{at}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise NmtError(f"{kind} {path} must be a mapping of sections, got {type(raw).__name__}")
    return raw


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply `a.b.c=value` overrides (values parsed as YAML) to a raw config mapping."""
    valid = set(_all_keys(Config))
    for item in overrides:
        if "=" not in item:
            raise NmtError(f"--set expects KEY=VALUE, got {item!r}")
        key, text = item.split("=", 1)
        key = key.strip()
        if key not in valid:
            raise _unknown(key, "--set")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            raise NmtError(f"--set {key}: cannot parse value {text!r}") from None
        node = raw
        parts = key.split(".")
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[parts[-1]] = value
    return raw


def validate(cfg: Config, where: str) -> Config:
    """Cross-field checks that a single field's type and range cannot express."""
    d, v, m = cfg.data, cfg.vocab, cfg.model
    if d.source == "hub" and not d.hub_name:
        raise NmtError(f"missing required key 'data.hub_name' in {where} (data.source is hub)")
    if d.source == "local" and not d.path:
        raise NmtError(f"missing required key 'data.path' in {where} (data.source is local)")
    if "train" not in d.splits:
        raise NmtError(f"'data.splits' in {where} must name a 'train' split")
    if m.tie_embeddings and not v.joint:
        raise NmtError(f"contradictory options in {where}: 'model.tie_embeddings' shares source and "
                       f"target embeddings and needs 'vocab.joint: true'")
    if m.arch == "transformer" and m.d_model % m.heads:
        raise NmtError(f"'model.d_model' ({m.d_model}) in {where} must be divisible by "
                       f"'model.heads' ({m.heads})")
    if cfg.decode.nbest > cfg.decode.beam:
        raise NmtError(f"'decode.nbest' ({cfg.decode.nbest}) in {where} must be <= "
                       f"'decode.beam' ({cfg.decode.beam})")
    if v.model and not v.joint:
        raise NmtError(f"'vocab.model' in {where} is a joint model; with 'vocab.joint: false' use "
                       f"'vocab.src_model' and 'vocab.tgt_model'")
    if d.synthetic.min_words > d.synthetic.max_words:
        raise NmtError(f"'data.synthetic.min_words' exceeds 'data.synthetic.max_words' in {where}")
    bk = cfg.eval.buckets
    if any(a >= b for a, b in zip(bk, bk[1:])) or any(b < 1 for b in bk):
        raise NmtError(f"'eval.buckets' in {where} must be strictly increasing positive word "
                       f"counts, got {bk}")
    if len(cfg.train.betas) != 2:
        raise NmtError(f"'train.betas' in {where} must hold two numbers")
    return cfg


def check_trainable(cfg: Config, where: str) -> None:
    """Checks that matter only for training (a stored run's config is never refused by them)."""
    if "valid" not in cfg.data.splits and (cfg.train.patience or cfg.train.schedule == "plateau"):
        key = "train.patience" if cfg.train.patience else "train.schedule: plateau"
        raise NmtError(f"'{key}' in {where} needs a validation split: add 'valid' to "
                       f"'data.splits'")


def from_dict(raw: dict, where: str) -> Config:
    return validate(_build(Config, raw, "", where), where)


def load_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Load a YAML config, apply dotted overrides, and return the validated dataclasses."""
    path = Path(path)
    raw = apply_overrides(read_yaml(path), overrides or [])
    where = str(path) + (" (with --set overrides)" if overrides else "")
    return from_dict(raw, where)


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def dump_yaml(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, default_flow_style=None)


# ----------------------------------------------------------------------------------------------
# Reference documentation

def docs_markdown() -> str:
    """Markdown reference of every key: type, default, meaning (written to docs/config.md)."""
    lines = ["# Configuration reference", "",
             "Generated from the dataclasses in `nmt/config.py` by "
             "`python -m nmt.config --docs > docs/config.md`; a test fails when they drift.", "",
             "Keys marked *required* have no default. Override any key on the command line with "
             "`--set section.key=value` (the value is parsed as YAML).", ""]

    def section(cls: type, prefix: str, title: str) -> None:
        lines.extend([f"## `{title}`", "", "| key | type | default | meaning |",
                      "|---|---|---|---|"])
        nested = []
        for f in dataclasses.fields(cls):
            tp = _hints(cls)[f.name]
            if dataclasses.is_dataclass(tp):
                nested.append((tp, prefix + f.name, f.metadata["doc"]))
                lines.append(f"| `{prefix}{f.name}` | section | see below | {f.metadata['doc']} |")
                continue
            if f.default is not REQUIRED:
                default = f.default
            elif f.default_factory is not REQUIRED:  # type: ignore[misc]
                default = f.default_factory()  # type: ignore[misc]
            else:
                default = "*required*"
            shown = default if default == "*required*" else f"`{yaml.safe_dump(default, default_flow_style=True).strip().removesuffix('...').strip()}`"
            cells = [f"`{prefix}{f.name}`", _type_name(tp), str(shown), f.metadata["doc"]]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
        for tp, name, _ in nested:
            section(tp, name + ".", name)

    for f in dataclasses.fields(Config):
        section(_hints(Config)[f.name], f.name + ".", f.name)
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["--docs"]:
        print(docs_markdown(), end="")
    else:
        print("usage: python -m nmt.config --docs", file=sys.stderr)
        sys.exit(2)
