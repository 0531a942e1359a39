"""Typed configuration: one dataclass per section, loaded from YAML with dotted `--set` overrides.

Every default lives here, next to its documentation (`docs/config.md` is generated from these
fields by `python -m nmt.config --docs`). Unknown keys, wrong types and out-of-range values fail
before any work starts with one line naming the key, the file and what was expected.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import os
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml

from nmt.errors import NmtError

REQUIRED = dataclasses.MISSING
RELATIVE_PATHS = (
    "a relative path resolves against the folder of the config file that sets it "
    "(with --set: against the working directory)"
)


def opt(
    default: Any,
    doc: str,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    path: bool = False,
) -> Any:
    """A documented config field. `lo`/`hi` bound numbers (open bounds exclude the value);
    `path`: an input file or directory, relative to the folder of the config file setting it."""
    if path:
        doc += "; " + RELATIVE_PATHS
    meta = {"doc": doc, "lo": lo, "hi": hi, "lo_open": lo_open, "hi_open": hi_open, "path": path}
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
    long_fraction: float = opt(
        0.3, "share of sentences drawn from the long (nested-clause) regime", lo=0.0, hi=1.0
    )


@dataclass
class DataConfig:
    source: Literal["synthetic", "hub", "local"] = opt(
        REQUIRED,
        "where the corpus comes from: built-in synthetic generator, a HuggingFace hub "
        "dataset, or local files",
    )
    src_lang: str = opt(
        "src", "source language key (file suffix, JSONL/hub translation key, TSV column)"
    )
    tgt_lang: str = opt("tgt", "target language key")
    hub_name: Optional[str] = opt(None, "hub dataset id, e.g. bentrevett/multi30k (source: hub)")
    hub_config: Optional[str] = opt(None, "hub dataset config name, e.g. fr-en for wmt14")
    path: Optional[str] = opt(None, "directory holding the local files (source: local)", path=True)
    format: Literal["text", "tsv", "jsonl"] = opt(
        "text",
        "local format: text = SPLIT.SRC + SPLIT.TGT line-aligned files; tsv = SPLIT.tsv "
        "with columns named by the language keys (or src<TAB>tgt without header); jsonl = "
        'SPLIT.jsonl with {"translation": {SRC: ..., TGT: ...}}',
    )
    splits: dict[str, str] = opt(
        {"train": "train", "valid": "valid", "test": "test"},
        "split role -> split name on disk / on the hub (roles: train, "
        "valid, test, any others you want to evaluate)",
    )
    synthetic: SyntheticConfig = opt(
        SyntheticConfig(), "built-in corpus settings (source: synthetic)"
    )
    max_len: int = opt(
        100,
        "training pairs with more subword tokens than this on either side are "
        "dropped (train split only)",
        lo=1,
    )
    max_ratio: float = opt(
        3.0, "training pairs whose token-length ratio exceeds this are dropped", lo=1.0
    )
    batch_tokens: int = opt(
        3000, "token budget per batch (max of source and target tokens, padding included)", lo=1
    )
    batch_size: int = opt(
        0, "if > 0, batches hold this many sentences instead of a token budget", lo=0
    )
    lowercase: bool = opt(False, "lowercase both sides before subword training and encoding")
    workers: int = opt(
        1,
        "processes encoding the training split in `nmt prepare` / the first "
        "`nmt train` (Dataset.map num_proc)",
        lo=1,
    )
    prepared_dir: Optional[str] = opt(
        None,
        "where prepared (encoded, memory-mapped) corpora are "
        "cached; default $NMT_CACHE/prepared or "
        "~/.cache/nmt/prepared (relative to the "
        "working directory)",
    )


@dataclass
class VocabConfig:
    type: Literal["unigram", "bpe", "word"] = opt("unigram", "sentencepiece model type")
    size: int = opt(8000, "vocabulary size (per side when joint is false)", lo=8)
    joint: bool = opt(True, "one vocabulary for source and target")
    character_coverage: float = opt(1.0, "sentencepiece character_coverage", lo=0.5, hi=1.0)
    model: Optional[str] = opt(
        None, "existing sentencepiece model to use instead of training one (joint only)", path=True
    )
    src_model: Optional[str] = opt(
        None, "existing source sentencepiece model (joint: false)", path=True
    )
    tgt_model: Optional[str] = opt(
        None, "existing target sentencepiece model (joint: false)", path=True
    )
    max_sentences: int = opt(
        200000,
        "at most this many training sentences (a seeded sample, half "
        "per side when joint) feed subword training; unigram training "
        "peaks at about 23 bytes per character of the sample",
        lo=1,
    )


@dataclass
class ModelConfig:
    """Keys every architecture has. Each architecture extends this with its own dataclass
    (registered beside its model with `@register(name, config=...)`), and the `model:` section is
    checked against the chosen architecture's keys."""

    arch: str = opt(REQUIRED, "registered architecture (see the tables below)")
    layers: int = opt(1, "layers in encoder and decoder", lo=1)
    dropout: float = opt(0.1, "dropout probability", lo=0.0, hi=1.0, hi_open=True)

    def check(self, cfg: "Config", where: str) -> None:
        """Cross-field checks of this architecture against the whole config (none here)."""


@dataclass
class TrainConfig:
    run_dir: str = opt(
        "runs/default",
        "run directory: config, subword models, checkpoints, "
        "logs (relative to the working directory)",
    )
    seed: int = opt(1, "seeds Python, NumPy and torch; also the batch shuffling")
    max_steps: int = opt(0, "stop after this many optimiser steps (0 = no limit)", lo=0)
    max_epochs: int = opt(0, "stop after this many epochs (0 = no limit)", lo=0)
    max_minutes: float = opt(
        0.0, "wall-clock budget in minutes; stops cleanly with a checkpoint (0 = no limit)", lo=0.0
    )
    precision: Literal["auto", "fp32", "bf16", "fp16"] = opt(
        "auto",
        "autocast precision: bf16 on CPU or CUDA, fp16 on CUDA only (with a GradScaler); "
        "auto = bf16 where this machine runs it faster (a CUDA GPU with bf16, a CPU with "
        "AVX512-BF16 or AMX), else fp32",
    )
    device: Literal["auto", "cpu", "cuda"] = opt("auto", "auto = cuda when available")
    threads: int = opt(0, "torch intra-op threads on CPU (0 = torch's default)", lo=0)
    optimizer: Literal["adam", "adamw"] = opt("adam", "optimiser")
    lr: float = opt(0.0005, "peak learning rate", lo=0.0, lo_open=True)
    betas: list[float] = opt([0.9, 0.98], "Adam betas")
    weight_decay: float = opt(0.0, "weight decay", lo=0.0)
    clip_grad: float = opt(1.0, "clip the gradient norm to this (0 = off)", lo=0.0)
    label_smoothing: float = opt(
        0.1, "label smoothing of the cross-entropy loss", lo=0.0, hi=1.0, hi_open=True
    )
    accum_steps: int = opt(1, "batches accumulated per optimiser step", lo=1)
    schedule: Literal["constant", "noam", "inverse_sqrt", "plateau"] = opt(
        "constant",
        "learning-rate schedule; warmup applies to all but plateau. inverse_sqrt: "
        "linear warm-up to lr, then lr * sqrt(warmup_steps / step) (Vaswani et al. 2017 with lr "
        "as its peak); noam is another name for the same schedule",
    )
    warmup_steps: int = opt(0, "linear warm-up steps", lo=0)
    plateau_factor: float = opt(
        0.5,
        "plateau: multiply lr by this when validation stalls",
        lo=0.0,
        hi=1.0,
        lo_open=True,
        hi_open=True,
    )
    plateau_patience: int = opt(2, "plateau: validations without improvement before decaying", lo=0)
    min_lr: float = opt(1e-6, "plateau: learning-rate floor", lo=0.0)
    log_every: int = opt(50, "steps between log lines", lo=1)
    valid_every: int = opt(500, "steps between validations (also at the end)", lo=1)
    valid_max_sentences: int = opt(
        0, "decode at most this many validation sentences for BLEU (0 = all)", lo=0
    )
    early_stop_metric: Literal["bleu", "chrf", "loss"] = opt(
        "bleu", "metric for best checkpoint, early stopping and plateau"
    )
    patience: int = opt(0, "stop after this many validations without improvement (0 = never)", lo=0)
    keep_last: int = opt(3, "keep this many recent step checkpoints", lo=1)
    max_bad_steps: int = opt(5, "stop after this many consecutive non-finite losses", lo=1)
    compile: bool = opt(False, "wrap the model in torch.compile")
    progress: bool = opt(
        True, "show a tqdm progress bar (on a terminal only, never in a pipe or file)"
    )
    init_from: Optional[str] = opt(
        None,
        "fine-tune: start from the weights of this run directory "
        "(its best checkpoint) or checkpoint file, reusing its "
        "subword models (vocab must match it)",
        path=True,
    )
    init_optimizer: bool = opt(
        False,
        "with init_from: also continue its optimiser moments and "
        "schedule state (default: fresh ones)",
    )
    tf32: bool = opt(True, "let CUDA fp32 matmuls and convolutions use TF32 tensor cores")
    dist_timeout_minutes: float = opt(
        30.0,
        "under torchrun: how long a rank waits in a "
        "collective (e.g. while rank 0 validates) before "
        "the job fails",
        lo=0.0,
        lo_open=True,
    )
    average_last: int = opt(
        0,
        "at the end of training, average the last N step checkpoints "
        "into RUN/averaged.pt (0 = off; N <= keep_last)",
        lo=0,
    )


@dataclass
class DecodeConfig:
    beam: int = opt(5, "beam size (1 = greedy)", lo=1)
    alpha: float = opt(0.6, "GNMT length penalty exponent ((5+len)/6)^alpha; 0 = off", lo=0.0)
    max_len_a: float = opt(1.5, "hypotheses stop at a * source_length + b tokens", lo=0.0)
    max_len_b: int = opt(10, "see max_len_a", lo=1)
    nbest: int = opt(1, "hypotheses returned per sentence (<= beam)", lo=1)
    early_stop: bool = opt(
        True,
        "beam search: a sentence stops once its nbest finished hypotheses outrank its best live "
        "beam (exact for alpha 0); false: once it holds `beam` finished hypotheses",
    )
    greedy_floor: bool = opt(
        False,
        "beam search: also decode greedily and keep the greedy hypothesis when it scores higher "
        "(beam never below greedy in model score; costs a greedy pass)",
    )
    batch_tokens: int = opt(4000, "source-token budget per decoding batch", lo=1)
    max_input_tokens: int = opt(
        250, "longer inputs are truncated to this many subword tokens (with a warning)", lo=1
    )
    no_repeat_ngram: int = opt(
        0, "never repeat an n-gram of this many tokens in a hypothesis (0 = off)", lo=0
    )
    sample: bool = opt(
        False, "sample tokens instead of searching (nbest = samples per sentence; beam is ignored)"
    )
    temperature: float = opt(1.0, "sampling: divide the log-probs by this", lo=0.0, lo_open=True)
    top_k: int = opt(0, "sampling: draw from the k most probable tokens only (0 = all)", lo=0)
    top_p: float = opt(
        1.0,
        "sampling: draw from the smallest set of tokens holding this much probability (1 = all)",
        lo=0.0,
        hi=1.0,
        lo_open=True,
    )
    seed: int = opt(
        1, "sampling: random seed (the same seed, input and batch_tokens give the same samples)"
    )


@dataclass
class EvalConfig:
    buckets: list[int] = opt(
        [10, 20, 30, 40, 50],
        "upper bounds (source words, inclusive) of the length buckets; a final open bucket follows",
    )
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
        return NmtError(
            f"wrong type for '{key}' in {where}: expected {_type_name(tp)}, got {value!r}"
        )

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
        return {
            _coerce(k, kt, key, where): _coerce(v, vt, f"{key}.{k}", where)
            for k, v in value.items()
        }
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
        raise NmtError(
            f"value out of range for '{key}' in {where}: expected {expected}, got {value!r}"
        )


# Before per-architecture configs (checkpoint format 1), every stored model section held the keys
# of all architectures; a stored config drops the ones its architecture does not have.
LEGACY_MODEL_KEYS = frozenset(
    "rnn_type emb_size hidden_size enc_hidden_size reverse_source feed_context attention "
    "attention_size deep_output d_model heads ff attention_dropout norm positions max_positions "
    "tie_embeddings tie_output".split()
)


def model_classes() -> dict[str, type]:
    """Registered architecture name -> its config dataclass."""
    from nmt.models.registry import config_classes  # lazy: the model modules import this one

    return config_classes()


def _model_class(raw: Any, where: str) -> type:
    """The config dataclass of the architecture a raw `model:` mapping names."""
    if not isinstance(raw, dict):
        return ModelConfig  # _build reports the section's type
    arch = raw.get("arch")
    if "arch" not in raw:  # before any key it would call unknown
        raise NmtError(f"missing required key 'model.arch' in {where}")
    if not isinstance(arch, str):
        raise NmtError(f"wrong type for 'model.arch' in {where}: expected str, got {arch!r}")
    classes = model_classes()
    if arch not in classes:
        close = difflib.get_close_matches(arch, classes, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise NmtError(
            f"unknown architecture 'model.arch: {arch}' in {where}{hint} "
            f"(registered: {', '.join(sorted(classes))})"
        )
    return classes[arch]


def _variants(tp: type) -> list[type]:
    """The dataclasses a section may be: every architecture's for `model`, else just `tp`."""
    return [tp, *model_classes().values()] if tp is ModelConfig else [tp]


def _all_keys(cls: type, prefix: str = "") -> list[str]:
    keys: dict[str, None] = {}
    for f in dataclasses.fields(cls):
        tp = _hints(cls)[f.name]
        keys[prefix + f.name] = None
        if dataclasses.is_dataclass(tp):
            for variant in _variants(tp):
                keys.update(dict.fromkeys(_all_keys(variant, prefix + f.name + ".")))
    return list(keys)


def _unknown(key: str, where: str, cls: type = None, prefix: str = "") -> NmtError:  # type: ignore[assignment]
    """An unknown key, with the closest key of its own section (or of the whole config)."""
    own = [prefix + f.name for f in dataclasses.fields(cls)] if cls else _all_keys(Config)
    arch = getattr(cls, "arch_name", None) if cls is not None else None
    if arch is None:
        close = difflib.get_close_matches(key, own, n=1, cutoff=0.6)
        return NmtError(
            f"unknown key '{key}' in {where}" + (f"; did you mean '{close[0]}'?" if close else "")
        )

    def owners(name: str) -> list[str]:
        return [
            n for n, c in model_classes().items() if name in {f.name for f in dataclasses.fields(c)}
        ]

    if owners(key.removeprefix(prefix)):
        return NmtError(
            f"unknown key '{key}' in {where}: the '{arch}' architecture has no "
            f"such key (it belongs to {', '.join(owners(key.removeprefix(prefix)))})"
        )
    # A misspelt key: suggest the closest key of any architecture, saying whose it is.
    pool = list(
        dict.fromkeys(
            own + [prefix + f.name for c in model_classes().values() for f in dataclasses.fields(c)]
        )
    )
    close = difflib.get_close_matches(key, pool, n=1, cutoff=0.6)
    if not close:
        return NmtError(f"unknown key '{key}' in {where}")
    hint = f"; did you mean '{close[0]}'?"
    if close[0] not in own:
        hint += (
            f" (a key of {', '.join(owners(close[0].removeprefix(prefix)))}, not of the "
            f"'{arch}' architecture)"
        )
    return NmtError(f"unknown key '{key}' in {where}{hint}")


def _build(cls: type, raw: Any, prefix: str, where: str, stored: bool = False) -> Any:
    if not isinstance(raw, dict):
        name = prefix.rstrip(".") or "the top level"
        raise NmtError(f"wrong type for '{name}' in {where}: expected a mapping, got {raw!r}")
    if cls is ModelConfig:
        cls = _model_class(raw, where)
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if stored and issubclass(cls, ModelConfig):
        raw = {k: v for k, v in raw.items() if k in fields or k not in LEGACY_MODEL_KEYS}
    for k in raw:
        if k not in fields:
            raise _unknown(prefix + str(k), where, cls, prefix)
    kwargs = {}
    for name, f in fields.items():
        key = prefix + name
        tp = hints[name]
        if name not in raw:
            if f.default is REQUIRED and f.default_factory is REQUIRED:  # type: ignore[misc]
                raise NmtError(f"missing required key '{key}' in {where}")
            continue
        if dataclasses.is_dataclass(tp):
            kwargs[name] = _build(
                tp, raw[name] if raw[name] is not None else {}, key + ".", where, stored
            )
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
            raise NmtError(
                f"YAML tag not allowed in {path}{at}: {problem} ({kind} files are "
                f"plain YAML; nothing was run)"
            ) from None
        raise NmtError(f"YAML syntax error in {path}{at}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise NmtError(f"{kind} {path} must be a mapping of sections, got {type(raw).__name__}")
    return raw


# ----------------------------------------------------------------------------------------------
# Inheritance (`base:`) and paths relative to the config file


def merge_sections(base: dict, over: dict) -> dict:
    """`over` merged into a copy of `base`: mappings merge key by key (recursively), anything
    else in `over` replaces what `base` holds."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        both = isinstance(v, dict) and isinstance(out.get(k), dict)
        out[k] = merge_sections(out[k], v) if both else copy.deepcopy(v)
    return out


def path_keys() -> list[tuple[str, str]]:
    """(section, key) of every input path a config file may set relative to its own folder."""
    return [
        (s.name, f.name)
        for s in dataclasses.fields(Config)
        for f in dataclasses.fields(_hints(Config)[s.name])
        if f.metadata.get("path")
    ]


def _resolve_paths(raw: dict, folder: Path) -> None:
    """Make the file's relative input paths absolute against `folder` (in place)."""
    for section, key in path_keys():
        node = raw.get(section)
        value = node.get(key) if isinstance(node, dict) else None
        if isinstance(value, str) and value and not os.path.isabs(os.path.expanduser(value)):
            node[key] = os.path.abspath(folder / value)


def _bases(raw: dict, path: Path) -> list[str]:
    bases = raw.pop("base", [])
    bases = [bases] if isinstance(bases, str) else bases
    if not isinstance(bases, list) or not all(isinstance(b, str) and b for b in bases):
        raise NmtError(
            f"wrong type for 'base' in {path}: expected a config file path (relative "
            f"to {path}'s folder) or a list of them, got {raw.get('base', bases)!r}"
        )
    return bases


def read_config_file(path: str | Path, _chain: tuple[Path, ...] = ()) -> dict:
    """The raw mapping of a config file over its `base` files: parents first (in the order
    listed), the file's own keys win, mappings merge recursively, and a parent may have bases
    of its own. Each file's relative input paths resolve against that file's folder."""
    path = Path(path)
    if path.resolve() in _chain:
        names = " -> ".join(str(p) for p in (*_chain, path.resolve()))
        raise NmtError(f"'base' in {path} makes a cycle of config files: {names}")
    raw = read_yaml(path)
    bases = _bases(raw, path)
    _resolve_paths(raw, path.parent)
    merged: dict = {}
    for base in bases:
        parent = path.parent / base
        if not parent.is_file():
            raise NmtError(f"base config file not found: {parent} (named by 'base' in {path})")
        merged = merge_sections(merged, read_config_file(parent, (*_chain, path.resolve())))
    return merge_sections(merged, raw)


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
    m.check(cfg, where)  # the architecture's own cross-field checks
    if cfg.decode.nbest > cfg.decode.beam and not cfg.decode.sample:
        raise NmtError(
            f"'decode.nbest' ({cfg.decode.nbest}) in {where} must be <= "
            f"'decode.beam' ({cfg.decode.beam})"
        )
    if v.model and not v.joint:
        raise NmtError(
            f"'vocab.model' in {where} is a joint model; with 'vocab.joint: false' use "
            f"'vocab.src_model' and 'vocab.tgt_model'"
        )
    if d.synthetic.min_words > d.synthetic.max_words:
        raise NmtError(f"'data.synthetic.min_words' exceeds 'data.synthetic.max_words' in {where}")
    bk = cfg.eval.buckets
    if any(a >= b for a, b in zip(bk, bk[1:])) or any(b < 1 for b in bk):
        raise NmtError(
            f"'eval.buckets' in {where} must be strictly increasing positive word counts, got {bk}"
        )
    if cfg.train.average_last > cfg.train.keep_last:
        raise NmtError(
            f"'train.average_last' ({cfg.train.average_last}) in {where} must be <= "
            f"'train.keep_last' ({cfg.train.keep_last}): older checkpoints are deleted"
        )
    if len(cfg.train.betas) != 2:
        raise NmtError(f"'train.betas' in {where} must hold two numbers")
    return cfg


def check_trainable(cfg: Config, where: str) -> None:
    """Checks that matter only for training (a stored run's config is never refused by them)."""
    if "valid" not in cfg.data.splits and (cfg.train.patience or cfg.train.schedule == "plateau"):
        key = "train.patience" if cfg.train.patience else "train.schedule: plateau"
        raise NmtError(f"'{key}' in {where} needs a validation split: add 'valid' to 'data.splits'")


def model_config(arch: str, where: str = "the model config", **values: Any) -> ModelConfig:
    """An architecture's config dataclass from keyword values, checked like a `model:` section
    (for code and tests that build models without a config file)."""
    return _build(ModelConfig, {"arch": arch, **values}, "model.", where)


def with_decode_options(cfg: Config, options: dict, where: str = "the command line") -> Config:
    """cfg with `decode.KEY: value` options checked as if they stood in the config file."""
    raw = {**dataclasses.asdict(cfg.decode), **options}
    cfg.decode = _build(DecodeConfig, raw, "decode.", where)
    return validate(cfg, where)


def from_dict(raw: dict, where: str, stored: bool = False) -> Config:
    """Validated dataclasses from a raw mapping. `stored`: a config written by an earlier nmt
    (a checkpoint's or a run's), whose model section may hold other architectures' keys."""
    return validate(_build(Config, raw, "", where, stored), where)


def load_config(
    path: str | Path, overrides: list[str] | None = None, stored: bool = False
) -> Config:
    """Load a YAML config (over its `base` files), apply dotted overrides, and return the
    validated dataclasses. A `stored` config (a run's RUN/config.yaml) is read as written: its
    paths were resolved when the run was made."""
    path = Path(path)
    raw = apply_overrides(read_yaml(path) if stored else read_config_file(path), overrides or [])
    where = str(path) + (" (with --set overrides)" if overrides else "")
    return from_dict(raw, where, stored)


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def dump_yaml(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, default_flow_style=None)


# ----------------------------------------------------------------------------------------------
# Reference documentation


INHERITANCE_DOC = (
    "A config file may start from others: `base: ../multi30k/rnnsearch.yaml` (or a list of "
    "files), relative to the file's folder. The base files are read first, in order, and the "
    "file's own keys win; sections merge key by key, and a base file may have a `base` of its "
    "own. Input paths ({}) resolve against the folder of the file that sets them, `--set` values "
    "against the working directory, and the run stores them resolved in RUN/config.yaml. Output "
    "paths (`train.run_dir`, `data.prepared_dir`) stay relative to the working directory."
)


def docs_markdown() -> str:
    """Markdown reference of every key: type, default, meaning (written to docs/config.md)."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from the dataclasses in `nmt/config.py` by "
        "`python -m nmt.config --docs > docs/config.md`; a test fails when they drift.",
        "",
        "Keys marked *required* have no default. Override any key on the command line with "
        "`--set section.key=value` (the value is parsed as YAML).",
        "",
        INHERITANCE_DOC.format(", ".join(f"`{sec}.{key}`" for sec, key in path_keys())),
        "",
    ]

    def section(cls: type, prefix: str, title: str, skip: frozenset = frozenset()) -> None:
        lines.extend(
            [f"## `{title}`", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        )
        nested = []
        for f in dataclasses.fields(cls):
            if f.name in skip:
                continue
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
            shown = (
                default
                if default == "*required*"
                else f"`{yaml.safe_dump(default, default_flow_style=True).strip().removesuffix('...').strip()}`"
            )
            cells = [f"`{prefix}{f.name}`", _type_name(tp), str(shown), f.metadata["doc"]]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
        for tp, name, _ in nested:
            section(tp, name + ".", name)

    shared = frozenset(f.name for f in dataclasses.fields(ModelConfig))
    for f in dataclasses.fields(Config):
        section(_hints(Config)[f.name], f.name + ".", f.name)
        if f.name == "model":  # then each architecture's own keys
            for arch, cls in sorted(model_classes().items()):
                section(cls, "model.", f"model` with `arch: {arch}", shared)
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["--docs"]:
        print(docs_markdown(), end="")
    else:
        print("usage: python -m nmt.config --docs", file=sys.stderr)
        sys.exit(2)
